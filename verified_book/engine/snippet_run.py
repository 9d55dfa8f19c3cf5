"""Running a book snippet: as a script in its own interpreter, or inside this one.

A reader runs a snippet as `python snippet.py`. The suite does the same in its slow set,
and in the default run executes the file inside the test process instead, as `__main__`,
with the same working folder, arguments and environment a script gets: the libraries
are then imported once for all snippets and claims rather than once per snippet. A
snippet that sets what a library reads only as it loads (`LOAD_TIME_VARIABLES`: a BLAS
thread count, the CUDA devices shown) is run as a script there too. What a
snippet changes of the process (working folder, `sys.argv`, `sys.path`, environment,
warning filters, random states, torch's and numpy's global settings, the modules it
imported from beside itself) is put back afterwards, so it cannot leak into the claims
that run after it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import random
import runpy
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from verified_book.records.record import How

#: what every snippet run gets in its environment, wherever it runs
SNIPPET_ENV = {"PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

#: read once, when a native library loads (its thread pools, the devices CUDA shows): set by a
#: snippet in a process where the libraries are already loaded, they would change nothing
LOAD_TIME_VARIABLES = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "PYTORCH_CUDA_ALLOC_CONF",
)


@dataclass(frozen=True)
class SnippetRun:
    """How one run of a snippet went."""

    stdout: str
    stderr: str
    exit_status: int
    seconds: float
    how: How  # "script" or "in process"
    unhonoured: tuple[str, ...] = ()  # load-time variables the snippet set that this process had already read


def run_as_script(path: Path, timeout: float = 600) -> SnippetRun:
    """`python <path>` in a fresh temporary folder, as a reader runs it."""
    env = {**os.environ, **SNIPPET_ENV}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="snippet-") as workdir:
        proc = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=timeout, cwd=workdir, env=env
        )
    return SnippetRun(proc.stdout, proc.stderr, proc.returncode, time.perf_counter() - started, "script")


def run_in_process_or_as_script(path: Path) -> SnippetRun:
    """The default run's way: inside this process, unless the snippet sets a variable only a
    fresh interpreter honours (it pins a thread pool, say); then it runs as a script, so what is
    recorded is what a reader's run would print. A pin written plainly in the source is seen
    before running; one set some other way is caught after the run, which is then discarded."""
    if pins_load_time_variables(path.read_text(encoding="utf-8")):
        return run_as_script(path)
    done = run_in_process(path)
    return run_as_script(path) if done.unhonoured else done


#: this process's run of each snippet, by its resolved path: see `shared_run`
_SHARED: dict[Path, SnippetRun] = {}


def shared_run(path: Path) -> SnippetRun:
    """The default run's run of a snippet, made once per process (`run_in_process_or_as_script`):
    the snippet's own check and every measured claim that reads a figure it prints
    (`verified_book.engine.snippet_figures`) take the same run, so the machine is timed once."""
    key = path.resolve()
    if key not in _SHARED:
        _SHARED[key] = run_in_process_or_as_script(path)
    return _SHARED[key]


def forget_shared_runs() -> None:
    """Drop the runs `shared_run` kept: a book opened again runs its snippets again."""
    _SHARED.clear()


def pins_load_time_variables(source: str) -> bool:
    """Whether `source` sets a load-time variable (`os.environ["NAME"] = "value"`, or `setdefault`) to
    a value this process did not start with, or names one in a way that cannot be read without running."""
    mentioned = {name for name in LOAD_TIME_VARIABLES if name in source}
    if not mentioned:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True
    pinned: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            key, value = node.targets[0].slice, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setdefault"
            and len(node.args) == 2
        ):
            key, value = node.args
        else:
            continue
        if isinstance(key, ast.Constant) and key.value in LOAD_TIME_VARIABLES:
            pinned[key.value] = value.value if isinstance(value, ast.Constant) else value
    return mentioned != set(pinned) or any(os.environ.get(name) != value for name, value in pinned.items())


def run_in_process(path: Path) -> SnippetRun:
    """Execute `path` as `__main__` in this interpreter, isolated as a script run would be."""
    out, err = io.StringIO(), io.StringIO()
    status = 0
    unhonoured: list[str] = []
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="snippet-") as workdir,
        _process_kept(path.parent, workdir),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        before = {name: os.environ.get(name) for name in LOAD_TIME_VARIABLES}
        sys.argv = [str(path)]
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException as e:  # noqa: BLE001 - a script's crash is its exit status, as in a subprocess
            if isinstance(e, KeyboardInterrupt):
                raise
            status = 1
            err.write(_traceback_from(path, e))
        unhonoured = [name for name, value in before.items() if os.environ.get(name) != value]
    return SnippetRun(
        out.getvalue(), err.getvalue(), status, time.perf_counter() - started, "in process", tuple(unhonoured)
    )


def _traceback_from(path: Path, error: BaseException) -> str:
    """The traceback as the script would print it: from the snippet's own frames on."""
    frames = traceback.extract_tb(error.__traceback__)
    first = next((i for i, f in enumerate(frames) if Path(f.filename) == path), 0)
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames[first:])]
    return "".join(lines + traceback.format_exception_only(type(error), error))


@contextlib.contextmanager
def _process_kept(script_dir: Path, workdir: str) -> Iterator[None]:
    """Everything a script may change of the process, saved, and put back on the way out."""
    cwd, argv, path, env = os.getcwd(), list(sys.argv), list(sys.path), dict(os.environ)
    modules = set(sys.modules)
    restorers = [
        _save_random(),
        _save_numpy(sys.modules.get("numpy")),
        _save_torch(sys.modules.get("torch")),
        _save_mlx(sys.modules.get("mlx.core")),
    ]
    os.chdir(workdir)
    sys.path.insert(0, str(script_dir))
    os.environ.update(SNIPPET_ENV)
    try:
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(cwd)
        sys.argv[:], sys.path[:] = argv, path
        os.environ.clear()
        os.environ.update(env)
        for name in set(sys.modules) - modules:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin and Path(origin).resolve().is_relative_to(script_dir.resolve()):
                del sys.modules[name]
        for restore in restorers:
            restore()


def _save_random() -> Callable[[], None]:
    state = random.getstate()
    return lambda: random.setstate(state)


def _save_numpy(np: Any) -> Callable[[], None]:
    if np is None:
        return lambda: None
    state, err, printing = np.random.get_state(), np.geterr(), np.get_printoptions()

    def restore() -> None:
        np.random.set_state(state)
        np.seterr(**err)
        np.set_printoptions(**printing)

    return restore


def _save_torch(torch: Any) -> Callable[[], None]:
    """torch's process-wide settings; where the snippet is first to import torch, the defaults it began from."""
    if torch is None:

        def later() -> None:
            loaded = sys.modules.get("torch")
            if loaded is not None:
                loaded.set_default_dtype(loaded.float32)
                loaded.set_grad_enabled(True)
                loaded.set_float32_matmul_precision("highest")

        return later
    saved = (
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.get_float32_matmul_precision(),
        torch.get_num_threads(),
        torch.random.get_rng_state(),
        (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
    )
    # CUDA's generators only where CUDA is already initialised: saving them must not start it
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def restore() -> None:
        dtype, grad, precision, threads, rng, deterministic = saved
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.set_float32_matmul_precision(precision)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        torch.random.set_rng_state(rng)
        # setting the mode at all imports torch's compiler (torch._dynamo, torch._inductor: a second or more),
        # so it is set only where the snippet changed it
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) != (
            deterministic
        ):
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)

    return restore


def _save_mlx(mx: Any) -> Callable[[], None]:
    if mx is None:
        return lambda: None
    device = mx.default_device()
    return lambda: mx.set_default_device(device)
