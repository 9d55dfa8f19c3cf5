"""Backends as adapters: one module per library, registered; topics ask the adapter, never the library's name."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from harness.paths import ROOT

from claims.ops import LIBRARIES, need, ops, supporting
from verified_book import backends
from verified_book.authoring.registry import NotOnBackend
from verified_book.backends import ADAPTERS, NAMES, Backend, names_of
from verified_book.records import results

BRANCH = re.compile(r"\.library\s*(==|!=|\bin\b|\bnot in\b)|backend\.name\s*(==|!=)|\.device\s*==\s*\"(cuda|mps|gpu)\"")


def test_the_backend_names_come_from_the_registered_adapters() -> None:
    assert list(ADAPTERS) == list(backends.BUILTIN_ADAPTERS)
    assert NAMES == tuple(n for cls in ADAPTERS.values() for n in cls.names)
    assert NAMES == (
        "numpy",
        "torch:cpu",
        "torch:cuda",
        "torch:mps",
        "torch:rocm",
        "mlx:cpu",
        "mlx:gpu",
        "jax:cpu",
        "jax:gpu",
    )
    assert results.BACKEND_NAMES == ("none", *NAMES)
    assert list(backends.detect()) == list(NAMES)


def test_capability_lists_follow_the_adapters() -> None:
    assert supporting("autodiff") == (*names_of("torch"), *names_of("mlx"), *names_of("jax"))
    assert "numpy" not in supporting("autodiff") and "jax:cpu" not in supporting("nn")
    assert "torch:rocm" in supporting("fp8_matmul"), "the library has it; the adapter says why a ROCm device does not"


def test_a_backends_marker_follows_its_name_and_its_device_the_librarys_words() -> None:
    rocm, mps, gpu = Backend("torch:rocm", True, ""), Backend("torch:mps", True, ""), Backend("jax:gpu", True, "")
    assert (rocm.place, rocm.device, rocm.marker) == ("rocm", "cuda", "rocm")
    assert (mps.place, mps.device, mps.marker) == ("mps", "mps", "mps")
    assert (gpu.place, gpu.device, gpu.marker) == ("gpu", "gpu", "jax")
    assert set(backends.markers()) >= {"cuda", "mps", "rocm", "mlx", "jax"}


def test_topics_do_not_branch_on_the_library() -> None:
    """The topics ask `ops(backend)`; only a library's own module of the book's operations knows its library."""
    own = {ROOT / (module.replace(".", "/") + ".py") for module, _ in LIBRARIES.values()}
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted(set((ROOT / "claims").rglob("*.py")) - own)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BRANCH.search(line) and 'f"' not in line.split("#")[0][: BRANCH.search(line).start()]
    ]
    assert not offenders, "\n".join(offenders)


def test_a_missing_library_is_an_unavailable_backend_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from verified_book.backends import jax as jax_adapter

    monkeypatch.setattr(jax_adapter, "try_import", lambda name: (None, f"{name} does not import (ModuleNotFoundError)"))
    found = jax_adapter.JaxAdapter.detect()
    assert found == [Backend(n, False, "jax does not import (ModuleNotFoundError)") for n in ("jax:cpu", "jax:gpu")]


def test_what_a_library_lacks_is_a_skip_in_its_own_words() -> None:
    numpy = backends.detect()["numpy"]
    with pytest.raises(NotOnBackend, match="numpy has no automatic differentiation"):
        need(numpy, "autodiff")
    with pytest.raises(NotOnBackend, match="numpy has no automatic differentiation"):
        ops(numpy).gradient(lambda x: x, [numpy.tensor(1.0)])
    need(numpy, "strides")  # has it: no error


@pytest.mark.parametrize("name", [b.name for b in backends.available()])
def test_every_available_adapter_casts_and_reports_finfo(name: str) -> None:
    backend = backends.detect()[name]
    adapter = backend.adapter
    x = backend.tensor([1.0 + 2.0**-10], adapter.dtype("float32"))
    assert float(ops(backend).round_trip(x, "bfloat16").tolist()[0]) == 1.0
    assert float(adapter.finfo(adapter.dtype("float16")).eps) == 2.0**-10
    assert backend.marker in backends.markers() or backend.marker == "cpu"


def test_numpy_asks_for_ml_dtypes_only_for_the_formats_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ml_dtypes numpy still computes its own formats; a format only ml_dtypes has is a skip
    whose reason names the package, never an ImportError out of the engine."""
    import sys

    import numpy as np

    from claims.ops.numpy import NumpyOps
    from verified_book.backends.numpy import NumpyAdapter

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` raises ImportError
    adapter = NumpyAdapter(Backend("numpy", True, ""))
    book_ops = NumpyOps(Backend("numpy", True, ""))
    assert float(adapter.finfo(adapter.dtype("float16")).eps) == 2.0**-10
    assert float(adapter.finfo(adapter.dtype("float32")).eps) == 2.0**-23
    assert adapter.iinfo("int8").max == 127
    for ask in (
        lambda: adapter.dtype("bfloat16"),
        book_ops.e8m0_bits,
        book_ops.e2m1_values,
        lambda: adapter.iinfo("int4"),
        lambda: adapter.finfo(np.dtype("V2").type),
    ):
        with pytest.raises(NotOnBackend, match="ml_dtypes"):
            ask()


def test_asking_the_backends_names_loads_no_library() -> None:
    """Iterating the backends and asking `in` loads nothing; asking for one loads its library."""
    script = (
        "import sys\n"
        "from verified_book.engine.session import Backends\n"
        "found = Backends()\n"
        "assert list(found) and 'numpy' in found and 'numpy' not in sys.modules\n"
        "found['numpy']\n"
        "print('numpy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"], done.stdout


def test_the_engines_adapters_hold_none_of_the_books_operations() -> None:
    """The engine knows no book: what this book computes on a library (`claims.ops`) is not an adapter's."""
    from claims.ops.base import Ops

    book = {name for name, value in vars(Ops).items() if callable(value) and not name.startswith("_")}
    assert {"adam_bytes", "e2m1_values", "quantize_fp4", "fp8_matmul", "round_trip"} <= book
    for cls in (backends.Adapter, *ADAPTERS.values()):
        assert not book & set(vars(cls)), f"{cls.__name__} defines the book's {sorted(book & set(vars(cls)))}"
