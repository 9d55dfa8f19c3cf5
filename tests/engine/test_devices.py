"""The GPU paths of the engine, on this CPU machine: each device is a fake that answers and
raises what the real one does (a torch without the card's kernels, an MLX whose default device
is the GPU, caches that must be emptied after an out-of-memory error)."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from claims.ops import ops
from verified_book import backends
from verified_book.authoring.registry import Claim, Kind
from verified_book.backends import Backend, touches_cuda_here
from verified_book.backends import torch as torch_adapter
from verified_book.backends.torch import cuda_build_problem
from verified_book.engine import check

pytestmark = pytest.mark.usefixtures("project_book")


class FakeCudaTorch:
    """torch as it looks on an RTX 5080: a device it sees, an architecture list, a kernel launch."""

    def __init__(
        self, archs: list[str], kernel_error: str | None = None, capability: tuple[int, int] = (12, 0)
    ) -> None:
        self.__version__ = "2.6.0+cu124"
        self.version = SimpleNamespace(cuda="12.4")
        self.launched = 0
        error = kernel_error

        class Tensor:
            def __mul__(inner, other: Any) -> "Tensor":
                return inner

            def sum(inner) -> "Tensor":
                return inner

            def item(inner) -> float:
                return 8.0

        def ones(n: int, device: str) -> Tensor:
            self.launched += 1
            if error:
                raise RuntimeError(error)
            return Tensor()

        self.ones = ones
        self.cuda = SimpleNamespace(
            get_device_name=lambda i=0: "NVIDIA GeForce RTX 5080",
            get_device_capability=lambda i=0: capability,
            get_arch_list=lambda: archs,
            is_available=lambda: True,
        )


NO_KERNEL = "CUDA error: no kernel image is available for execution on the device"


def test_a_torch_without_the_cards_architecture_is_not_a_cuda_backend() -> None:
    torch = FakeCudaTorch(["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])
    problem = cuda_build_problem(torch)
    assert problem is not None
    assert "not for NVIDIA GeForce RTX 5080 (compute capability 12.0)" in problem
    assert "sm_120" in problem and "pip install torch==2.6.0" in problem


def test_a_kernel_that_does_not_run_says_why_and_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    torch = FakeCudaTorch(["sm_80", "sm_90", "sm_120"], kernel_error=NO_KERNEL)
    problem = cuda_build_problem(torch)
    assert problem is not None and "no kernel image" in problem and "install a torch build with sm_120" in problem
    assert torch.launched == 1


def test_a_build_with_the_cards_kernels_is_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    for archs in (["sm_100", "sm_120"], ["sm_80", "compute_90"], []):
        assert cuda_build_problem(FakeCudaTorch(archs)) is None, archs


def test_detection_reports_the_missing_kernels_as_an_absent_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = FakeCudaTorch(["sm_80", "sm_90"])
    torch.backends = SimpleNamespace(mps=SimpleNamespace(is_available=lambda: False))
    monkeypatch.setattr(torch_adapter, "try_import", lambda name: (torch, "") if name == "torch" else (None, "absent"))
    found = {b.name: b for b in torch_adapter.TorchAdapter.detect()}
    assert not found["torch:cuda"].available and "sm_120" in found["torch:cuda"].reason


def test_only_the_cuda_worker_launches_a_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under xdist only gw0 runs CUDA items, so only it makes a CUDA context (hundreds of MB each)."""
    torch = FakeCudaTorch(["sm_120"])
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert not touches_cuda_here() and cuda_build_problem(torch) is None and torch.launched == 0
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert touches_cuda_here() and cuda_build_problem(torch) is None and torch.launched == 1


class FakeMlx(ModuleType):
    """mlx.core as on a Mac: the GPU is the default device until a stream says otherwise."""

    def __init__(self) -> None:
        super().__init__("mlx.core")
        self.cpu, self.gpu = "Device(cpu, 0)", "Device(gpu, 0)"
        self.stack = [self.gpu]
        self.cleared = 0

    def default_device(self) -> str:
        return self.stack[-1]

    def stream(self, device: str) -> Any:
        fake = self

        class Stream:
            def __enter__(inner) -> None:
                fake.stack.append(device)

            def __exit__(inner, *exc: Any) -> None:
                fake.stack.pop()

        return Stream()

    def clear_cache(self) -> None:
        self.cleared += 1


def _device_claim() -> Claim:
    def seen(backend: Backend) -> str:
        return str(sys.modules["mlx.core"].default_device())

    return Claim("devices.seen", Kind.LIBRARY, seen, "the device a claim computes on")


@pytest.mark.parametrize(("name", "device"), [("mlx:cpu", "Device(cpu, 0)"), ("mlx:gpu", "Device(gpu, 0)")])
def test_an_mlx_claim_computes_on_its_backends_device(monkeypatch: pytest.MonkeyPatch, name: str, device: str) -> None:
    """A claim that makes arrays without naming a device still computes on its backend's."""
    fake = FakeMlx()
    monkeypatch.setitem(sys.modules, "mlx.core", fake)
    outcome = check.evaluate(_device_claim(), Backend(name, True, "here"))
    assert (outcome.status, outcome.value) == (check.COMPUTED, device)
    assert fake.stack == [fake.gpu], "the stream is left on the way out"


def test_the_real_mlx_cpu_backend_computes_on_the_cpu() -> None:
    mx = pytest.importorskip("mlx.core")
    mlx_cpu = backends.detect()["mlx:cpu"]
    outcome = check.evaluate(_device_claim(), mlx_cpu)
    assert outcome.value == str(mx.cpu) or outcome.value == str(mx.Device(mx.cpu))


def test_out_of_memory_empties_the_mps_and_mlx_caches_too(monkeypatch: pytest.MonkeyPatch) -> None:
    emptied: list[str] = []
    torch = SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: False, empty_cache=lambda: emptied.append("cuda")),
        mps=SimpleNamespace(empty_cache=lambda: emptied.append("mps")),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: True)),
    )
    fake = FakeMlx()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "mlx.core", fake)

    def greedy(backend: Backend) -> int:
        raise RuntimeError("MPS backend out of memory (MPS allocated: 17.9 GB, other allocations: 1.2 GB)")

    outcome = check.evaluate(
        Claim("devices.greedy", Kind.LIBRARY, greedy, "asks too much"), Backend("torch:mps", True, "here")
    )
    assert outcome.status == check.FAILED and "ran out of device memory on torch:mps" in outcome.message
    assert emptied == ["mps"] and fake.cleared == 1


FLOAT8_ON_MPS = "Trying to convert Float8_e4m3fn to the MPS backend but it does not have support for that dtype."


@pytest.fixture
def fake_mps(monkeypatch: pytest.MonkeyPatch) -> Backend:
    """A torch:mps backend whose tensors live on the CPU but refuse float8 as the MPS device does."""
    torch = pytest.importorskip("torch")
    real_to = torch.Tensor.to

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        args = tuple("cpu" if a == "mps" else a for a in args)
        if kwargs.get("device") == "mps":
            kwargs["device"] = "cpu"
        dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
        if dtype is not None and "float8" in str(dtype):
            raise TypeError(FLOAT8_ON_MPS)
        return real_to(self, *args, **kwargs)

    real_tensor = torch.tensor

    def tensor(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("device") == "mps":
            kwargs["device"] = "cpu"
        return real_tensor(*args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.setattr(torch, "tensor", tensor)
    return Backend("torch:mps", True, "fake MPS device", torch.__version__, "mps")


FLOAT8_CASTS = [
    "rounding.e4m3.rel_error",
    "rounding.e4m3.zero_fraction",
    "rounding.e4m3_x64.rel_error",
    "rounding.e5m2.rel_error",
    "rounding.e4m3.flush_threshold",
    "formats.special.e4m3.nans",
    "formats.special.e5m2.infinities",
    "questions.q6.e4m3_smallest_normal",
]


@pytest.mark.parametrize("claim_id", FLOAT8_CASTS)
def test_a_float8_cast_on_mps_is_skipped_with_the_reason(fake_mps: Backend, claim_id: str) -> None:
    from verified_book.authoring.registry import REGISTRY

    outcome = check.evaluate(REGISTRY[claim_id], fake_mps)
    if claim_id.startswith("questions.q6"):  # reads finfo, which needs no tensor: computed on MPS too
        assert outcome.status == check.COMPUTED, outcome.message
        return
    assert outcome.status == check.SKIPPED, outcome.message
    assert "torch on MPS has no" in outcome.message and "TypeError" in outcome.message


class Node:
    """A backward-graph node as autograd exposes it: a name and the nodes it feeds."""

    def __init__(self, name: str, *inputs: "Node | None") -> None:
        self._name, self.next_functions = name, tuple((n, 0) for n in inputs)

    def name(self) -> str:
        return self._name


def _mlp_graph(linear: Any) -> Node:
    acc = lambda: Node("torch::autograd::AccumulateGrad")  # noqa: E731
    first = linear(None, acc(), acc())
    second = linear(Node("GeluBackward0", first), acc(), acc())
    return Node("MeanBackward0", Node("PowBackward0", second))


def test_the_graph_count_does_not_depend_on_how_a_device_decomposes_linear() -> None:
    """CPU and CUDA record nn.Linear as addmm of a transposed weight; MPS as one LinearBackward node."""
    from claims.topics.autograd import _graph_nodes

    addmm = lambda x, w, b: Node("AddmmBackward0", b, x, Node("TBackward0", w))  # noqa: E731
    linear = lambda x, w, b: Node("LinearBackward0", x, w, b)  # noqa: E731
    assert _graph_nodes(_mlp_graph(addmm)) == _graph_nodes(_mlp_graph(linear)) == 9
    assert _graph_nodes(None) == 0


def test_the_real_graph_on_the_cpu_counts_as_the_book_prints() -> None:
    from verified_book.authoring.registry import REGISTRY

    torch_cpu = backends.detect()["torch:cpu"]
    if not torch_cpu.available:
        pytest.skip(torch_cpu.reason)
    assert check.evaluate(REGISTRY["autograd.recorded.grad.graph_nodes"], torch_cpu).value == 9


def _kept_bits(backend: Backend) -> check.Outcome:
    from verified_book.authoring.registry import REGISTRY

    return check.evaluate(REGISTRY["formats.default.matmul.kept_bits"], backend)


def test_the_matmul_default_records_what_governs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", raising=False)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # torch's own default, whatever this machine's environment set
    try:
        outcome = _kept_bits(backends.detect()["torch:cpu"])
    finally:
        torch.set_float32_matmul_precision(previous)
    assert (outcome.status, outcome.value) == (check.COMPUTED, 23)
    recorded = [str(i) for i in outcome.inputs]
    assert "environment: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE = 'unset'" in recorded
    assert "torch:cpu: torch.get_float32_matmul_precision() = 'highest'" in recorded


def test_an_ngc_style_tf32_override_is_named_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 starts torch at precision "high": the default's figure is
    skipped with the variable named, never verified or failed by accident."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # what the variable does to torch as it loads
    try:
        outcome = _kept_bits(backends.detect()["torch:cpu"])
    finally:
        torch.set_float32_matmul_precision(previous)
    assert outcome.status == check.SKIPPED, outcome.message
    assert "'high'" in outcome.message and "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in outcome.message


@pytest.mark.parametrize(
    ("name", "variable", "value"),
    [
        ("torch:cuda", "NVIDIA_TF32_OVERRIDE", "0"),
        ("mlx:gpu", "MLX_ENABLE_TF32", "0"),
        ("mlx:gpu", "MLX_ENABLE_TF32", "1"),
    ],
)
def test_a_gpu_whose_environment_sets_tf32_says_so(
    monkeypatch: pytest.MonkeyPatch, name: str, variable: str, value: str
) -> None:
    """Checked before any device is touched, so it runs here on a backend this machine lacks."""
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(Backend, "activate", lambda self: __import__("contextlib").nullcontext())
    outcome = _kept_bits(Backend(name, True, "pretend"))
    assert outcome.status == check.SKIPPED and f"{variable}={value}" in outcome.message, outcome.message


def test_tf32_asked_for_under_a_driver_that_forbids_it_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from verified_book.authoring.registry import REGISTRY

    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    outcome = check.evaluate(REGISTRY["formats.default.matmul.tf32_kept_bits"], Backend("torch:cuda", True, "pretend"))
    assert outcome.status == check.SKIPPED and "NVIDIA_TF32_OVERRIDE=0" in outcome.message, outcome.message


class CountingMlx(FakeMlx):
    """mlx.core that counts what timing asks of it: evaluations, queued evaluations, synchronisations."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def synchronize(self, stream: Any = None) -> None:
        self.log.append("sync")

    def eval(self, *arrays: Any) -> None:
        self.log.append("eval")

    def async_eval(self, *arrays: Any) -> None:
        self.log.append("queue")


def test_mlx_timing_queues_the_calls_and_synchronises_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repetition of 20 calls costs one round trip to the GPU, not 20."""
    from claims.probes.devices import Runner

    fake = CountingMlx()
    monkeypatch.setitem(sys.modules, "mlx.core", fake)
    runner = Runner(Backend("mlx:gpu", True, "pretend"))
    runner.seconds_per_call(lambda: object(), 20)
    assert fake.log == ["sync"] + ["queue"] * 20 + ["sync"]


@pytest.mark.parametrize("name", ["numpy", "mlx:gpu"])
def test_the_first_cold_call_does_not_calibrate_the_repetitions(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The first call compiles (Metal, CUDA) and is slow; calibrated from it, a repetition would be one
    call long. One untimed call runs first, on every device."""
    import time

    from claims.probes.devices import Runner

    monkeypatch.setitem(sys.modules, "mlx.core", CountingMlx())
    calls = []

    def work() -> object:
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.05)  # compiling
        return object()

    runner = Runner(Backend(name, True, "pretend"))
    first = runner.calibrate(work)
    assert len(calls) == 2 and first < 0.04
    runner.repetition(work, first)()
    assert len(calls) > 3, "a warm call is short, so a repetition runs it many times"


def test_the_bandwidth_and_matmul_probes_calibrate_on_a_warm_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both probes take their repetition count from `Runner.calibrate`, never from a cold call."""
    from claims.probes import bandwidth, matmul
    from claims.probes.devices import Runner

    monkeypatch.setenv("CLAIMS_PROBE_CAP_S", "0.02")
    calibrated: list[int] = []
    real = Runner.calibrate

    def calibrate(self: Runner, fn: Any) -> float:
        calibrated.append(1)
        return real(self, fn)

    monkeypatch.setattr(Runner, "calibrate", calibrate)
    numpy = backends.detect()["numpy"]
    calls: list[int] = []

    def cold_then_fast() -> None:
        calls.append(1)
        if len(calls) == 1:
            import time

            time.sleep(0.05)

    bandwidth._measure(Runner(numpy), "read", cold_then_fast, 1 << 20, 1)
    assert calibrated == [1] and len(calls) > 10, "calibrated on the warm call, so repetitions run it many times"
    matmul._measure_matmul(Runner(numpy), "fp32", "")
    assert calibrated == [1, 1]


# --- torch on ROCm (Track X: the Radeon 8060S of a Ryzen AI Max+ 395, gfx1151) -------------------------

INVALID_DEVICE_FUNCTION = (
    "HIP error: invalid device function\nHIP kernel errors might be asynchronously reported at some "
    "other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
    "AMD_SERIALIZE_KERNEL=3"
)
RADEON = "AMD Radeon 8060S"
ROCM_ARCHS = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1200", "gfx1201"]


class FakeRocmTorch(FakeCudaTorch):
    """torch's ROCm build as it looks on a Ryzen AI Max+ 395: torch.cuda answers for the AMD GPU,
    torch.version.hip is set and CUDA's is not, and a kernel the build has no code for fails as HIP says."""

    def __init__(self, archs: list[str], gfx: str = "gfx1151") -> None:
        super().__init__(archs)
        self.__version__ = "2.13.0+rocm7.2"
        self.version = SimpleNamespace(cuda=None, hip="7.2.26015")
        built = {a.split(":")[0] for a in archs}
        fake = self

        def ones(n: int, device: str) -> Any:
            if gfx not in built:
                fake.launched += 1
                raise RuntimeError(INVALID_DEVICE_FUNCTION)
            return real_ones(n, device)  # counts the launch

        real_ones = self.ones
        self.ones = ones
        self.cuda.get_device_name = lambda i=0: RADEON
        self.cuda.get_device_capability = lambda i=0: (
            11,
            5,
        )  # what torch on ROCm reports: the gfx number, not a CUDA capability
        self.cuda.get_device_properties = lambda i=0: SimpleNamespace(
            name=RADEON, gcnArchName=f"{gfx}:sramecc-:xnack-", total_memory=96 * 2**30, major=11, minor=5
        )
        self.backends = SimpleNamespace(mps=SimpleNamespace(is_available=lambda: False))


def _detected(monkeypatch: pytest.MonkeyPatch, torch: Any) -> dict[str, Backend]:
    monkeypatch.setattr(torch_adapter, "try_import", lambda name: (torch, "") if name == "torch" else (None, "absent"))
    return {b.name: b for b in torch_adapter.TorchAdapter.detect()}


def test_a_rocm_build_with_the_gpus_architecture_is_the_rocm_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    torch = FakeRocmTorch([*ROCM_ARCHS, "gfx1151"])
    found = _detected(monkeypatch, torch)
    rocm, cuda = found[torch_adapter.ROCM], found["torch:cuda"]
    assert rocm.available and torch.launched == 1, rocm.reason
    assert rocm.reason == f"ROCm device {RADEON} (gfx1151, ROCm/HIP 7.2.26015)" and rocm.device_name == RADEON
    assert "CUDA" not in rocm.reason and "compute capability" not in rocm.reason
    assert not cuda.available and f"{RADEON} (gfx1151" in cuda.reason and "is torch:rocm" in cuda.reason
    assert (rocm.marker, rocm.device, rocm.place) == ("rocm", "cuda", "rocm"), "torch reaches it as its cuda device"
    assert "rocm" in backends.markers()


def test_a_rocm_build_without_gfx1151_says_so_and_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = FakeRocmTorch(ROCM_ARCHS)
    found = _detected(monkeypatch, torch)[torch_adapter.ROCM]
    assert not found.available and torch.launched == 0, "the architecture list answers before any kernel runs"
    assert f"has kernels for {', '.join(ROCM_ARCHS)}, not for {RADEON} (gfx1151)" in found.reason
    assert "install torch's ROCm build with gfx1151 kernels" in found.reason and "--index-url" in found.reason


def test_a_kernel_the_build_cannot_run_is_named_in_hips_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build whose architecture list is empty (some builds report none) still runs one kernel first."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    torch = FakeRocmTorch([])
    found = _detected(monkeypatch, torch)[torch_adapter.ROCM]
    assert not found.available and torch.launched == 1
    assert (
        f"a tiny kernel fails on {RADEON} (gfx1151): RuntimeError: HIP error: invalid device function" in found.reason
    )


def test_a_cuda_build_is_not_a_rocm_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    torch = FakeCudaTorch(["sm_120"])
    torch.backends = SimpleNamespace(mps=SimpleNamespace(is_available=lambda: False))
    found = _detected(monkeypatch, torch)
    assert found["torch:cuda"].available
    assert (
        not found[torch_adapter.ROCM].available
        and "CUDA 12.4 build, not a ROCm build" in found[torch_adapter.ROCM].reason
    )


@pytest.fixture
def fake_rocm(monkeypatch: pytest.MonkeyPatch) -> Backend:
    """torch:rocm on the real torch, its torch.cuda answering as the Radeon 8060S does (nothing computes on it)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.version, "hip", "7.2.26015")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: RADEON)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (11, 5))
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda i=0: SimpleNamespace(name=RADEON, gcnArchName="gfx1151", total_memory=96 * 2**30),
    )
    monkeypatch.setattr(Backend, "activate", lambda self: __import__("contextlib").nullcontext())
    return Backend(torch_adapter.ROCM, True, f"ROCm device {RADEON}", torch.__version__, RADEON)


def test_cuda_only_questions_are_skipped_on_rocm_naming_the_device(fake_rocm: Backend) -> None:
    from verified_book.authoring.registry import REGISTRY, NotOnBackend

    adapter = fake_rocm.adapter
    assert adapter.compute_capability() is None, "torch's (11, 5) on ROCm is the gfx number, not a compute capability"
    assert adapter.device_words() == f"{RADEON} (gfx1151, ROCm/HIP 7.2.26015)"
    with pytest.raises(NotOnBackend, match=f"TF32 is a mode of NVIDIA's tensor cores.*{RADEON} \\(gfx1151"):
        ops(fake_rocm).tf32_by_settings()
    fp8 = ops(fake_rocm).matmul_unsupported("fp8")
    assert fp8 is not None and "float8_e4m3fn as CUDA defines it" in fp8 and "gfx1151" in fp8
    outcome = check.evaluate(REGISTRY["formats.default.matmul.torch_setting_bits"], fake_rocm)
    assert outcome.status == check.SKIPPED and f"{RADEON} (gfx1151, ROCm/HIP" in outcome.message, outcome.message


def test_the_rocm_backend_records_no_nvidia_variable(fake_rocm: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    settings = ops(fake_rocm).matmul_settings()
    assert "NVIDIA_TF32_OVERRIDE" not in settings and "gfx1151" in str(settings["device"])
    assert ops(fake_rocm).matmul_environment() is None, "cuBLAS's variable does not reach hipBLAS"


def test_claims_on_every_torch_backend_include_rocm() -> None:
    from verified_book.authoring.registry import REGISTRY

    assert REGISTRY["formats.default.matmul.torch_setting_bits"].runs_on(torch_adapter.ROCM)
    assert not REGISTRY["formats.default.matmul.tf32_kept_bits"].runs_on(torch_adapter.ROCM), (
        "a torch:cuda claim stays CUDA's"
    )


def test_track_x_with_its_gpu_is_fingerprinted_in_rocms_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    from verified_book.engine import machine

    monkeypatch.setitem(sys.modules, "torch", FakeRocmTorch([*ROCM_ARCHS, "gfx1151"]))
    monkeypatch.setattr(machine, "_cpu_model", lambda: "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S")
    info = machine.fingerprint()
    assert (info["gpu"], info["gfx"], info["hip"]) == (RADEON, "gfx1151", "7.2.26015")
    assert info["compute_capability"] is None and info["driver"] is None
    found = machine.identify(info)
    assert found.markers == ("ryzen_ai_max",) and found.slug == "amd-radeon-8060s"
    assert torch_adapter.ROCM in machine.profiles()["ryzen_ai_max"].backends


# --- JAX on a GPU ----------------------------------------------------------------------------------------

NO_BINARY = (
    "INTERNAL: Failed to load in-memory CUBIN (compilation failure): CUDA_ERROR_NO_BINARY_FOR_GPU: "
    "no kernel image is available for execution on the device"
)


class XlaRuntimeError(RuntimeError):
    """What jaxlib raises when XLA fails on the device (jax.errors.JaxRuntimeError)."""


class FakeJax(ModuleType):
    """jax with its CUDA plugin on a DGX Spark: a CPU device, a GPU device, and a kernel that runs or
    fails as XLA does when the plugin has no code for the GPU."""

    def __init__(self, gpu: bool = True, kernel_error: str | None = None) -> None:
        super().__init__("jax")
        self.__version__ = "0.10.2"
        self.lib = SimpleNamespace(__version__="0.10.2")
        client = SimpleNamespace(platform_version="cuda 13000")
        self.gpu = SimpleNamespace(device_kind="NVIDIA GB10", platform="gpu", client=client)
        self.has_gpu, self.launched = gpu, 0
        error = kernel_error
        fake = self

        class Array:
            def __mul__(inner, other: Any) -> "Array":
                return inner

            def sum(inner) -> float:
                return 8.0

        def ones(n: int) -> Array:
            fake.launched += 1
            if error:
                raise XlaRuntimeError(error)
            return Array()

        self.numpy = SimpleNamespace(ones=ones)

    def devices(self, kind: str | None = None) -> list[Any]:
        if kind == "cpu":
            return [SimpleNamespace(device_kind="cpu", platform="cpu")]
        if not self.has_gpu:
            raise RuntimeError(
                "Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
                "Platforms present are: cpu"
            )
        return [self.gpu]

    def default_device(self, device: Any) -> Any:
        return __import__("contextlib").nullcontext()


def _jax_detected(monkeypatch: pytest.MonkeyPatch, jax: FakeJax, plugins: dict[str, str]) -> dict[str, Backend]:
    from verified_book.backends import jax as jax_adapter

    monkeypatch.setattr(jax_adapter, "try_import", lambda name: (jax, "") if name == "jax" else (None, "absent"))
    monkeypatch.setattr(jax_adapter, "plugin_versions", lambda: plugins)
    return {b.name: b for b in jax_adapter.JaxAdapter.detect()}


def test_jax_with_its_cuda_plugin_is_a_gpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    jax = FakeJax()
    found = _jax_detected(monkeypatch, jax, {"jax-cuda13-plugin": "0.10.2"})
    gpu = found["jax:gpu"]
    assert found["jax:cpu"].available and gpu.available and jax.launched == 1, gpu.reason
    assert gpu.reason == "JAX on the GPU, NVIDIA GB10 (cuda 13000), through jax-cuda13-plugin 0.10.2"
    assert (gpu.device, gpu.marker, gpu.device_name) == ("gpu", "jax", "NVIDIA GB10")
    assert __import__("os").environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false", "JAX leaves torch and MLX their memory"


def test_jax_without_a_gpu_plugin_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _jax_detected(monkeypatch, FakeJax(), {})["jax:gpu"]
    assert not found.available and "jax 0.10.2 has no GPU plugin installed" in found.reason
    assert "pip install jax[cuda13]==0.10.2" in found.reason


def test_a_plugin_of_another_jaxlib_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _jax_detected(monkeypatch, FakeJax(), {"jax-cuda13-plugin": "0.9.2"})["jax:gpu"]
    assert not found.available and "jax-cuda13-plugin 0.9.2 does not match jaxlib 0.10.2" in found.reason


def test_a_plugin_that_finds_no_gpu_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _jax_detected(monkeypatch, FakeJax(gpu=False), {"jax-cuda13-plugin": "0.10.2"})["jax:gpu"]
    assert not found.available and "finds no GPU (RuntimeError: Unknown backend: 'gpu'" in found.reason


def test_a_jax_kernel_the_gpu_cannot_run_is_named_in_xlas_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    found = _jax_detected(monkeypatch, FakeJax(kernel_error=NO_BINARY), {"jax-cuda13-plugin": "0.10.2"})["jax:gpu"]
    assert not found.available
    assert "a tiny kernel fails on NVIDIA GB10 (cuda 13000): XlaRuntimeError: INTERNAL: Failed to load" in found.reason


def test_only_the_cuda_worker_runs_a_jax_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    jax = FakeJax(kernel_error=NO_BINARY)
    assert _jax_detected(monkeypatch, jax, {"jax-cuda13-plugin": "0.10.2"})["jax:gpu"].available and jax.launched == 0
