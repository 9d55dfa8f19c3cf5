"""The probes' own logic: repetition and spread on a fake clock, sizes, exact intensities, the
per-run store, and scripts/merge-results on sound and unsound files."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import io
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from harness.paths import ROOT

from claims.probes import store
from claims.probes.bandwidth import _llc_from_sysfs, _size, cpu_buffer_bytes
from claims.probes.devices import MIB
from claims.probes.matmul import crossover_batch, intensity
from claims.probes.timing import CAP_ENV, Measurement, Policy, default_policy, repeat, spread


class FakeWork:
    """A repetition that takes preset times on a fake clock."""

    def __init__(self, times: list[float]) -> None:
        self.times = list(times)
        self.now = 0.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def one(self) -> float:
        seconds = self.times[min(self.calls, len(self.times) - 1)]
        self.calls += 1
        self.now += seconds
        return seconds


POLICY = Policy(warmup=1, min_reps=5, min_reps_slow=3, max_reps=50, target_spread=0.05, cap_s=1.0, progress_after_s=1.0)


def test_steady_work_settles_after_the_minimum() -> None:
    work = FakeWork([0.01] * 100)
    m = repeat(work.one, what="x", work=1e9, unit="GB/s", policy=POLICY, clock=work.clock, stream=io.StringIO())
    assert m.settled and m.reps == 5 and work.calls == 6  # one warm-up, five timed
    assert m.rate == pytest.approx(100.0) and m.spread == 0.0


def test_noisy_work_stops_at_the_cap_with_its_spread() -> None:
    work = FakeWork([0.01, 0.02, 0.03, 0.01, 0.02, 0.03] * 50)
    m = repeat(work.one, what="x", work=1e9, unit="GB/s", policy=POLICY, clock=work.clock, stream=io.StringIO())
    assert not m.settled
    assert m.spread > 0.05
    timed = sum(m.samples)
    assert 1.0 <= timed < 1.0 + 0.03  # stops at the first repetition past the cap
    assert m.median_s == pytest.approx(0.02)


def test_noisy_work_stops_at_max_reps() -> None:
    work = FakeWork([0.001, 0.003] * 500)
    policy = Policy(warmup=0, min_reps=5, max_reps=12, target_spread=0.01, cap_s=100.0)
    m = repeat(work.one, what="x", work=1.0, unit="GB/s", policy=policy, clock=work.clock, stream=io.StringIO())
    assert m.reps == 12 and not m.settled


def test_slow_work_needs_fewer_repetitions() -> None:
    work = FakeWork([0.5, 0.9, 0.5, 0.7])
    m = repeat(work.one, what="x", work=1.0, unit="GB/s", policy=POLICY, clock=work.clock, stream=io.StringIO())
    assert m.reps == 3  # five would not fit in the 1 s cap, three is the floor


def test_a_first_sample_from_calibration_counts() -> None:
    work = FakeWork([0.01] * 10)
    policy = Policy(warmup=0, min_reps=5, cap_s=1.0)
    m = repeat(
        work.one, what="x", work=1.0, unit="GB/s", policy=policy, clock=work.clock, stream=io.StringIO(), first=0.01
    )
    assert m.reps == 5 and work.calls == 4


def test_progress_line_only_past_a_second() -> None:
    fast, slow = io.StringIO(), io.StringIO()
    work = FakeWork([0.01] * 100)
    repeat(work.one, what="quick", work=1.0, unit="GB/s", policy=POLICY, clock=work.clock, stream=fast)
    assert fast.getvalue() == ""
    work = FakeWork([0.3, 0.2, 0.4, 0.3, 0.5, 0.2, 0.4])
    policy = Policy(warmup=1, min_reps=5, cap_s=1.5, progress_after_s=1.0)
    repeat(work.one, what="slow copy", work=1e9, unit="GB/s", policy=policy, clock=work.clock, stream=slow)
    text = slow.getvalue()
    assert "\r  probe slow copy:" in text and "GB/s" in text and "spread" in text and text.endswith("\n")


def test_bad_times_are_refused() -> None:
    with pytest.raises(ValueError, match="positive time"):
        repeat(lambda: 0.0, what="x", work=1.0, unit="GB/s", policy=POLICY, stream=io.StringIO())
    with pytest.raises(ValueError, match="work per call must be positive"):
        repeat(lambda: 1.0, what="x", work=0, unit="GB/s", policy=POLICY, stream=io.StringIO())


def test_spread_is_iqr_over_median() -> None:
    assert spread([1.0]) == 0.0
    assert spread([1.0, 1.0, 1.0]) == 0.0
    # inclusive quartiles of 1..5 are 2 and 4; median 3
    assert spread([5.0, 1.0, 3.0, 2.0, 4.0]) == pytest.approx(2 / 3)


def test_measurement_rates() -> None:
    m = Measurement("x", (0.5, 0.25, 1.0), work=1e9, unit="GB/s", settled=True)
    assert m.rate == pytest.approx(2.0) and m.best == pytest.approx(4.0)
    assert "2 GB/s" in m.describe() and "median of 3 runs" in m.describe()


def test_cap_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAP_ENV, "2.5")
    assert default_policy(gpu=False).cap_s == 2.5
    monkeypatch.setenv(CAP_ENV, "soon")
    with pytest.raises(ValueError, match=CAP_ENV):
        default_policy(gpu=False)
    monkeypatch.delenv(CAP_ENV)
    assert default_policy(gpu=False).cap_s <= 1.5
    assert default_policy(gpu=True).warmup >= default_policy(gpu=False).warmup


def test_cache_sizes_parse() -> None:
    assert _size("32768K") == 32 * MIB
    assert _size("1M") == MIB
    assert _size("512") == 512
    with pytest.raises(ValueError):
        _size("lots")


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str) -> None:
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    for name, text in (("level", str(level)), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (d / name).write_text(text + "\n")


def test_last_level_cache_sums_distinct_caches(tmp_path: Path) -> None:
    for cpu in range(4):
        _cache(tmp_path, cpu, 0, 1, "Data", "32K", str(cpu))
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 2, 3, "Unified", "32768K", "0-1" if cpu < 2 else "2-3")
    assert _llc_from_sysfs(tmp_path, [0, 1, 2, 3]) == 64 * MIB  # two L3s of 32 MiB
    assert _llc_from_sysfs(tmp_path, [0, 1]) == 32 * MIB
    assert _llc_from_sysfs(tmp_path / "absent", [0]) is None


def test_cpu_buffers_are_four_llcs_within_memory() -> None:
    assert cpu_buffer_bytes(llc=32 * MIB, available=24 * 2**30) == 128 * MIB
    assert cpu_buffer_bytes(llc=96 * MIB, available=24 * 2**30) == 384 * MIB
    assert cpu_buffer_bytes(llc=1024 * MIB, available=24 * 2**30) == 2048 * MIB  # capped at 2 GiB
    assert cpu_buffer_bytes(llc=1024 * MIB, available=8 * 2**30) == 1024 * MIB  # an eighth of what is free
    assert cpu_buffer_bytes(llc=64 * MIB, available=1 * 2**30) == 128 * MIB  # an eighth of what is free
    assert cpu_buffer_bytes(llc=4 * MIB, available=24 * 2**30) == 128 * MIB  # never under 4 × 32 MiB


def test_intensity_is_exact() -> None:
    assert intensity(1, 4096, 12288) == Fraction(2 * 4096 * 12288, 4 * (4096 * 12288 + 4096 + 12288))
    assert isinstance(intensity(2048, 4096, 12288), Fraction)
    assert intensity(1, 4096, 12288) < Fraction(1, 2) < intensity(2, 4096, 12288)


@pytest.mark.parametrize("ridge", [0.3, 0.5, 1.0, 9.7, 64.0, 150.25, 1000.0])
def test_crossover_is_the_first_batch_past_the_ridge(ridge: float) -> None:
    batch = crossover_batch(ridge, 4096, 12288)
    assert batch is not None
    assert intensity(batch, 4096, 12288) > Fraction(ridge)
    assert batch == 1 or intensity(batch - 1, 4096, 12288) <= Fraction(ridge)


def test_no_crossover_past_the_limit() -> None:
    limit = Fraction(2 * 4096 * 12288, 4 * (4096 + 12288))  # what an endless batch tends to
    assert crossover_batch(float(limit), 4096, 12288) is None
    assert crossover_batch(float(limit) * 0.999, 4096, 12288) is not None


def test_store_measures_once_and_keeps_failures() -> None:
    store.clear()
    calls: list[int] = []

    def measure() -> int:
        calls.append(1)
        return 7

    assert store.once(("b", "q"), measure) == 7 and store.once(("b", "q"), measure) == 7
    assert len(calls) == 1 and store.peek(("b", "q")) == 7

    def refuse() -> int:
        calls.append(1)
        raise RuntimeError("no device")

    for _ in range(2):
        with pytest.raises(RuntimeError, match="no device"):
            store.once(("b", "r"), refuse)
    assert len(calls) == 2
    store.clear()
    assert store.peek(("b", "q")) is None


def test_probe_bandwidth_small_run_on_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real, tiny run: the plumbing works and counts a copy as read plus write."""
    monkeypatch.setenv(CAP_ENV, "0.05")
    from claims.probes.bandwidth import measure
    from verified_book.backends import detect

    numpy_backend = detect()["numpy"]
    m = measure(numpy_backend, "copy", nbytes=4 * MIB, threads=2)
    assert m.work == 8 * MIB and m.unit == "GB/s" and m.rate > 0 and m.reps >= 3
    r = measure(numpy_backend, "read", nbytes=4 * MIB, threads=1)
    assert r.work == 4 * MIB and r.rate > 0


def test_probe_sweep_small_run_on_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAP_ENV, "0.05")
    from claims.probes.matmul import measure_sweep
    from verified_book.backends import detect

    points = measure_sweep(detect()["numpy"], 256, 512, batches=(1, 8))
    assert set(points) == {1, 8}
    for batch, point in points.items():
        assert point.measurement is not None and point.gflops > 0
        assert point.measurement.work == 2 * batch * 256 * 512 and point.weight_bytes == 4 * 256 * 512


def test_on_the_cpu_only_the_sweep_s_first_batch_gets_an_untimed_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Later batches reuse the warm weight: their first call is timed and calibrates the repetitions."""
    monkeypatch.setenv(CAP_ENV, "0.02")
    from claims.probes import devices
    from claims.probes.matmul import measure_sweep
    from verified_book.backends import detect

    calibrated: list[int] = []
    real = devices.Runner.calibrate
    monkeypatch.setattr(devices.Runner, "calibrate", lambda self, fn: calibrated.append(1) or real(self, fn))
    points = measure_sweep(detect()["numpy"], 128, 256, batches=(1, 2, 4))
    assert len(calibrated) == 1 and all(p.measurement is not None and p.gflops > 0 for p in points.values())


# scripts/merge-results


def _merge_results() -> Any:
    path = ROOT / "scripts" / "merge-results"
    loader = importlib.machinery.SourceFileLoader("merge_results", str(path))
    spec = importlib.util.spec_from_loader("merge_results", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _sound_file() -> dict[str, Any]:
    record = {
        "status": "verified",
        "kind": "measured",
        "value": 12.5,
        "figures": [],
        "message": "",
        "inputs": [],
        "source": "claims/topics/measured.py:1",
        "citation": None,
        "hardware": None,
        "date": "2026-11-29T13:21:18+00:00",
        "seconds": 0.5,
        "version": "2.4.6",
    }
    exact = {
        "status": "verified",
        "kind": "exact",
        "value": 2,
        "figures": [],
        "message": "",
        "inputs": [],
        "source": "claims/topics/measured.py:1",
        "citation": None,
        "hardware": None,
        "date": "2026-11-29T13:21:18+00:00",
        "seconds": 0.0,
        "version": None,
    }
    from verified_book.authoring.registry import REGISTRY

    exact_id = next(c.id for c in REGISTRY if c.kind.value == "exact")
    return {
        "schema_version": 1,
        "slug": "test-box",
        "machine": {"slug": "test-box", "markers": [], "fingerprint": {"cpu": "Test CPU", "cores": 2}},
        "environment": {
            "date": "2026-11-29T13:21:18+00:00",
            "versions": {"numpy": "2.4.6"},
            "backends": {"numpy": "2.4.6"},
        },
        "records": {"probe.bandwidth.copy": {"numpy": record}, exact_id: {"none": exact}},
        "outputs": {},
    }


def _write(folder: Path, data: Any, name: str = "test-box.json") -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_merge_results_merges_a_sound_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mr = _merge_results()
    incoming, results = tmp_path / "incoming", tmp_path / "results"
    incoming.mkdir()
    path = _write(incoming, _sound_file())
    assert mr.main([str(path), "--into", str(results)]) == 0
    merged = json.loads((results / "test-box.json").read_text())
    assert (
        merged["run"]["measured"]["probe.bandwidth.copy"]["numpy"]["value"] == 12.5
    )  # a measurement sits in the run header
    assert "test-box.json" in capsys.readouterr().out


def _broken(change: str) -> tuple[dict[str, Any] | str, str, str]:
    """(file contents, file name, words the refusal must contain)."""
    data = _sound_file()
    rec = data["records"]["probe.bandwidth.copy"]["numpy"]
    if change == "slug":
        data["slug"] = data["machine"]["slug"] = "../evil"
        return data, "test-box.json", "not a safe machine name"
    if change == "name":
        return data, "other-box.json", "named after its slug"
    if change == "unknown claim":
        data["records"]["probe.bandwidth.teleport"] = {"numpy": rec}
        return data, "test-box.json", "names no claim of this book"
    if change == "implausible":
        rec["value"] = 5e9
        return data, "test-box.json", "outside"
    if change == "negative":
        rec["value"] = -3.0
        return data, "test-box.json", "outside"
    if change == "not a number":
        rec["value"] = "fast"
        return data, "test-box.json", "is not a number"
    if change == "kind":
        rec["kind"] = "exact"
        return data, "test-box.json", "declares probe.bandwidth.copy as 'measured'"
    if change == "backend":
        data["records"]["probe.bandwidth.copy"]["tpu"] = copy.deepcopy(rec)
        return data, "test-box.json", "unknown backend"
    if change == "nan":
        return json.dumps(data).replace("12.5", "NaN"), "test-box.json", "not a valid results file"
    if change == "json":
        return "{ not json", "test-box.json", "not valid JSON"
    if change == "status":
        rec["status"] = "great"
        return data, "test-box.json", "status 'great'"
    raise AssertionError(change)


@pytest.mark.parametrize(
    "change",
    [
        "slug",
        "name",
        "unknown claim",
        "implausible",
        "negative",
        "not a number",
        "kind",
        "backend",
        "nan",
        "json",
        "status",
    ],
)
def test_merge_results_refuses_a_bad_file(change: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mr = _merge_results()
    incoming, results = tmp_path / "incoming", tmp_path / "results"
    incoming.mkdir()
    good = _write(
        incoming, _sound_file() | {"slug": "good-box", "machine": {"slug": "good-box", "markers": []}}, "good-box.json"
    )
    data, name, words = _broken(change)
    bad = _write(incoming, data, name)
    assert mr.main([str(good), str(bad), "--into", str(results)]) == 1
    err = capsys.readouterr().err
    assert f"refused {bad}" in err and words in err, err
    assert "nothing merged" in err
    assert not results.exists() or not any(results.iterdir())  # the good file waits for the bad one
