"""The old path of `verified_book.integration.mkdocs_plugin`, which books written on the engine import."""

import sys

from verified_book.integration import mkdocs_plugin as _module

sys.modules[__name__] = _module
