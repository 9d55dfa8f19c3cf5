"""Set-up's installer: uv where it can be had, pip where not, both from the same lock to the same package set."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from harness.paths import ROOT
from harness.scripts import run_py


def _in_tmp(run: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Set-up pointed at a virtual environment and a tools folder of `tmp_path`, on a plain Linux machine."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for name, path in (("ROOT", tmp_path), ("VENV", tmp_path / ".venv"), ("BIN", tmp_path / ".venv" / "bin")):
        monkeypatch.setattr(run, name, path)
    monkeypatch.setattr(run, "STAMP", tmp_path / ".venv" / ".installed")
    monkeypatch.setattr(run, "TOOLS", tmp_path / ".cache" / "tools")
    monkeypatch.setattr(run, "UV_LOCK", ROOT / "requirements" / "lock" / "tools" / "uv.txt")
    monkeypatch.setattr(run, "LOCKS", ROOT / "requirements" / "lock")
    monkeypatch.setenv(run.TARGET_VARIABLE, "Linux x86_64 none 2.39")
    monkeypatch.delenv(run.INSTALLER_VARIABLE, raising=False)
    monkeypatch.setattr(run, "reachable", lambda url, timeout=8.0: False)
    monkeypatch.setattr(run, "_has_torch", lambda: False)
    monkeypatch.setattr(run, "_report_builds", lambda target: None)


def test_the_tools_lock_pins_uv_with_a_hash_for_each_of_its_files() -> None:
    run = run_py()
    text = run.UV_LOCK.read_text(encoding="utf-8")
    pins = [m.group(0) for m in run.PIN.finditer(text)]
    assert len(pins) == 1 and run.uv_pin() == pins[0].split(" ", 1)[0], "uv alone, pinned exactly"
    assert pins[0].count("--hash=sha256:") >= 4, "a hash for each platform's wheel"
    assert "def write_uv_lock" in (ROOT / "scripts" / "lock").read_text(encoding="utf-8"), "scripts/lock writes it"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(run.TOOLS / "uv-0" / "bin" / "uv")], cwd=ROOT)
    assert ignored.returncode == 0, "the fetched uv stays out of git"


def test_where_uv_cannot_be_fetched_set_up_installs_with_pip_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No index answers (a closed port of this machine stands in for no network): pip fetches nothing, pip installs."""
    run = run_py()
    _in_tmp(run, monkeypatch, tmp_path)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    installer = run.choose_installer()
    said = capsys.readouterr().out
    assert installer.name == "pip" and installer.uv is None
    assert re.search(r"set-up: installing with pip, since uv cannot be had \(pip could not fetch uv==\S+: .+\)", said)
    assert said.count("\n") == 1, "one line says it"
    assert not (run.TOOLS / run.uv_pin().replace("==", "-")).exists(), "nothing half-fetched is taken for uv"
    assert installer.command("-e", ".")[:4] == [run.BIN / "python", "-m", "pip", "install"]


def _fake_setup(run: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, uv: Path | None) -> list[list[str]]:
    """set-up's commands for the `verify` job with uv (its binary `uv`) or, where None, without uv."""
    _in_tmp(run, monkeypatch, tmp_path)
    monkeypatch.setattr(run, "find_uv", lambda: (uv, "uv 0.0.0") if uv else (None, "no network"))
    monkeypatch.setattr(
        run, "pip_sources", lambda: ("--find-links", "/wheels", "--index-strategy", "unsafe-best-match")
    )
    commands: list[list[str]] = []
    lock = run.lock_for(run.this_machine())

    def fake_run(*cmd: Any, tell_failure: bool = True) -> None:
        commands.append([str(c) for c in cmd])
        if "venv" in commands[-1] and not (tmp_path / ".venv" / "bin" / "python").exists():
            (tmp_path / ".venv" / "bin").mkdir(parents=True)
            (tmp_path / ".venv" / "bin" / "python").touch()
        if "compile" in commands[-1]:  # what uv resolves: two of the lock's pins
            pins = [m for m in run.PIN.finditer(lock.read_text(encoding="utf-8"))][:2]
            out = Path(commands[-1][commands[-1].index("-o") + 1])
            out.write_text("".join(f"{m.group(1)}=={m.group(2)}\n" for m in pins), encoding="utf-8")
            commands[-1].append(out.read_text(encoding="utf-8"))
        if "-r" in commands[-1]:
            commands[-1].append(Path(commands[-1][commands[-1].index("-r") + 1]).read_text(encoding="utf-8"))

    monkeypatch.setattr(run, "_run", fake_run)
    run.setup("verify")
    return commands


def test_with_uv_every_step_runs_uv_from_the_same_lock_each_file_hash_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_py()
    uv = tmp_path / "uv"
    commands = _fake_setup(run, monkeypatch, tmp_path, uv)
    out = capsys.readouterr().out
    assert "set-up done (installed with uv)" in out
    assert commands[0][:2] == [str(uv), "venv"] and "--allow-existing" in commands[0]
    assert all(c[0] == str(uv) for c in commands if "ipykernel" not in c), "uv installs every step"
    assert all("--find-links" in c for c in commands[1:] if "pip" in c), "from where pip is configured to look"
    compiled = next(c for c in commands if "compile" in c)
    lock = str(run.lock_for(run.this_machine()))
    assert compiled[compiled.index("-c") + 1] == lock, "resolved against the platform's lock, as pip is"
    installed = next(c for c in commands if "--require-hashes" in c and "--no-deps" in c and c is not compiled)
    pins = compiled[-1].splitlines()
    hashed = installed[-1]
    assert [line for line in hashed.splitlines() if "==" in line] == [f"{p} \\" for p in pins], "exactly that set"
    assert hashed.count("--hash=sha256:") >= len(pins), "each with the lock's hashes"
    assert commands[-1][-2:] == ["-e", "."] and "--no-deps" in commands[-1]


def test_without_uv_every_step_runs_pip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_py()
    commands = _fake_setup(run, monkeypatch, tmp_path, None)
    assert "set-up done (installed with pip)" in capsys.readouterr().out
    assert commands[0][1:3] == ["-m", "venv"]
    assert all(c[1:4] == ["-m", "pip", "install"] for c in commands[1:] if "ipykernel" not in c)
    assert not [c for c in commands if "compile" in c or "/wheels" in c], "pip reads its own configuration"


def test_a_pin_the_lock_does_not_hold_fails_as_pip_fails_it(tmp_path: Path) -> None:
    run = run_py()
    lock = run.LOCKS / "linux-x86_64-py3.11.txt"
    first = next(run.PIN.finditer(lock.read_text(encoding="utf-8")))
    assert run.hashed(lock, [(first.group(1).upper(), first.group(2))]) == first.group(0) + "\n", "names as PEP 503"
    with pytest.raises(SystemExit, match=r"no pin with hashes for numpy==0\.0\.1"):
        run.hashed(lock, [("numpy", "0.0.1")])


def test_pip_s_configured_sources_become_uv_s_with_pip_s_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_py()
    listed = (
        "global.find-links='/opt/wheels'\nglobal.index-url='https://mirror/simple'\n"
        "global.extra-index-url='file:///a file:///b'\n:env:.find-links='/env/wheels'\nglobal.cert='/c.pem'\n"
    )
    monkeypatch.setattr(
        run.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=listed, stderr="")
    )
    sources = run.pip_sources()
    assert sources == (
        "--index-url", "https://mirror/simple", "--extra-index-url", "file:///a", "--extra-index-url", "file:///b",
        "--find-links", "/env/wheels", "--index-strategy", "unsafe-best-match",
    )  # fmt: skip
    installer = run.Installer("uv", Path("uv"), sources)
    torch = installer.command("torch", "--index-url", run.CPU_INDEX)
    assert torch.count("--index-url") == 1 and run.CPU_INDEX in torch, "the command's own index wins, as in pip"


def _distributions(venv: Path) -> list[str]:
    """Each distribution installed in `venv`, `name==version`, as `pip freeze --all` lists them."""
    code = (
        "import importlib.metadata as m\n"
        "print('\\n'.join(sorted(f\"{d.metadata['Name'].lower().replace('_', '-')}=={d.version}\" "
        "for d in m.distributions())))"
    )
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.slow
def test_uv_and_pip_install_the_same_package_set(tmp_path: Path) -> None:
    """Two fresh virtual environments of the `setup` job, one set up with uv and one with pip (minutes)."""
    run = run_py()
    uv, why = run.find_uv()
    if uv is None:
        pytest.skip(f"uv cannot be had here: {why}")
    venvs = {}
    for installer in ("uv", "pip"):
        venvs[installer] = tmp_path / installer
        env = {**os.environ, "VERIFIED_BOOK_VENV": str(venvs[installer]), run.INSTALLER_VARIABLE: installer}
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "setup"], capture_output=True, text=True, env=env, timeout=1500
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"set-up done (installed with {installer})" in done.stdout
    with_uv, with_pip = _distributions(venvs["uv"]), _distributions(venvs["pip"])
    assert len(with_uv) > 100 and "verified-book" in {d.split("==")[0] for d in with_uv}
    assert with_uv == with_pip, sorted(set(with_uv) ^ set(with_pip))
