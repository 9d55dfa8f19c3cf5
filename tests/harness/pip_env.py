"""pip's environment as a reader's machine gives it, for the tests that ask pip what set-up would install."""

from __future__ import annotations

import os


def plain_env() -> dict[str, str]:
    """pip as on a reader's machine: no configuration file, none of this machine's pip settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if os.environ.get("PIP_CERT"):
        env["PIP_CERT"] = os.environ["PIP_CERT"]
    return env
