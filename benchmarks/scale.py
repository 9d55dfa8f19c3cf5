#!/usr/bin/env python3
"""What the engine costs as a book grows: a synthetic book at 1, 4, 16 and 64 times this one's size.

    .venv/bin/python benchmarks/scale.py [--sizes 1,4,16,64] [--machines 1,10,50]
                                         [--skip-changed] [--skip-serve] [--skip-site]

For each size, writes a book with benchmarks/synthetic_book.py (16 pages and about 1,000 figures per unit of
size, every claim trivially cheap on numpy, so what is measured is the engine) in a temporary folder, and times,
one after another, each in a process of its own:

1. collection: `pytest --collect-only -q`;
2. the full run: `pytest`, which writes this machine's history (its store in the book's `results.local/`);
3. a second full run, which reads that file back and merges into it (`history_kept`: it set nothing aside);
4. `pytest --changed` after one figure of a middle page is printed wrong (its figure stale), then after it is
   put back (`changed_back`); and after one quoted value of a data file is edited (`changed_data`, with the
   figures it left stale), then put back (`changed_data_back`);
5. `verified-book serve`: its start (to its first "serve: http://" line), then the same figure printed wrong
   and back, each timed from the save to the first poll of the served page that shows the new mark (as
   benchmarks/serve.py times it);
6. the machine's history: its store (`results.local/<machine>.sqlite`) read whole, one claim's run merged into
   it and the whole history merged into it; and the results file it exports (the exchange format, and the
   history's form before the store): its size, reading and checking it, merging it into a copy of itself and
   one claim's run into it, and writing it (each in a fresh process: `--records STORE`);
7. the site build (`mkdocs build`, its first build of the results, so every file is checked) with the results
   file as 1, 10 and 50 machines (`--machines`): copies under other machines' slugs (benchmarks/run.py's
   `fleet_of`); and each built again (`rebuild`), finding what the first kept in `.cache/verified-book/`.

Each step's peak memory is the largest resident set of the processes it started (`resource.getrusage`
RUSAGE_CHILDREN `ru_maxrss`, in a wrapper process of its own; serve's own `VmHWM`). Then each growth
exponent is fitted, the slope of log(time) over log(size) between 4x and 64x (least squares over the sizes
present from 4x up; over every size present where fewer than two are), and printed. The figures are merged
into benchmarks/results/<machine-slug>.json under `scale`, each size with its date: a run of some sizes keeps
the others, and a run that skips a step keeps that step's figures of the size from before, with their date
(`earlier`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Sequence

from verified_book.records import store

try:  # imported as benchmarks.scale (the tests), or run as a script, whose folder Python puts first on the path
    from benchmarks import synthetic_book
    from benchmarks.run import fleet_of
    from benchmarks.serve import MARK, free_port, seconds_text, wait
except ImportError:
    import synthetic_book  # type: ignore[no-redef]
    from serve import MARK, free_port, seconds_text, wait  # type: ignore[no-redef]

    from run import fleet_of  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1, 4, 16, 64)
MACHINES = (1, 10, 50)
STEP_LIMIT_S = 4 * 3600  # any one step; the 64x book's full run took minutes on a 2-core machine
WRAPPER = (
    "import json, resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(json.dumps(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(done.returncode)\n"
)


def env_for() -> dict[str, str]:
    """This environment with this checkout's engine first on the path, and Python's bytecode cache allowed, as
    on a reader's machine: without it pytest compiles its rewritten modules and every plugin's on each run."""
    return {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
        "NO_MKDOCS_2_WARNING": "1",
    }


def step(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Seconds, exit status, peak memory (MB, of every process the command started) and last line of one
    command."""
    with tempfile.TemporaryDirectory(prefix="scale-step-") as folder:
        peak_file = Path(folder) / "peak.json"
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", WRAPPER, str(peak_file), *cmd],
            cwd=cwd,
            env=env or env_for(),
            capture_output=True,
            text=True,
            timeout=STEP_LIMIT_S,
        )
        seconds = time.perf_counter() - started
        peak_kib = json.loads(peak_file.read_text()) if peak_file.exists() else 0
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    summary = next((line for line in reversed(lines) if " in " in line and ("passed" in line or "failed" in line)), "")
    out: dict[str, Any] = {
        "seconds": round(seconds, 2),
        "exit_status": proc.returncode,
        "peak_mb": round(peak_kib / 1024, 1),
    }
    if summary:
        out["summary"] = summary.strip("= ")
    figures = next((line for line in lines if line.startswith("figures (")), "")
    if figures:
        out["figures"] = figures
    if proc.returncode not in (0, 1):
        out["error"] = "\n".join(lines[-5:])
    return out


def save(path: Path, old: str, new: str) -> None:
    """Every place `old` is printed on the page, printed as `new`: a figure printed twice is edited twice."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new), encoding="utf-8")


def pytest_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]


def one_figure(book: synthetic_book.Book) -> tuple[Path, str, str]:
    """A middle page, one of its derived figures as printed, and the same figure printed wrong."""
    page = book.page(book.pages // 2)
    name = synthetic_book.page_name(book.pages // 2)
    match = re.search(rf"\[([1-9][^\]]*)\]\(claim:{re.escape(name)}\.exact\.e0\)", page.read_text())
    assert match, f"{page}: no figure of {name}.exact.e0"
    right = match.group(0)
    text = match.group(1)
    wrong = right.replace(f"[{text}]", f"[{int(text[0]) % 9 + 1}{text[1:]}]", 1)
    return page, right, wrong


def time_changed(book: synthetic_book.Book) -> dict[str, Any]:
    """`pytest --changed` after one figure is printed wrong, and after it is put back."""
    page, right, wrong = one_figure(book)
    save(page, right, wrong)
    edited = step(pytest_cmd("--changed"), book.root)
    save(page, wrong, right)
    back = step(pytest_cmd("--changed"), book.root)
    return {"edited": edited, "back": back, "figure": right}


def one_quoted_value(book: synthetic_book.Book) -> tuple[Path, str, str]:
    """A middle page's second quoted value in its part's data file, as stated and one more: the figures that
    derive from it are its quoted claim's, four exact claims' and four library claims' (twice where the recap
    prints them again)."""
    middle = book.pages // 2
    data = book.root / "book_claims" / "data" / "vendor" / f"part{middle // synthetic_book.PAGES_PER_PART:03d}.toml"
    key = f"{synthetic_book.page_name(middle)}_q1"
    value = synthetic_book.vendor_value(middle, 1)
    return data, f"[{key}]\nvalue = {value}\n", f"[{key}]\nvalue = {value + 1}\n"


def time_changed_data(book: synthetic_book.Book) -> dict[str, Any]:
    """`pytest --changed` after one quoted value of a data file is edited (the figures derived from it stale),
    and after it is put back."""
    data, right, wrong = one_quoted_value(book)
    save(data, right, wrong)
    edited = step(pytest_cmd("--changed"), book.root)
    save(data, wrong, right)
    back = step(pytest_cmd("--changed"), book.root)
    return {"edited": edited, "back": back, "file": str(data.relative_to(book.root)), "key": right.split("]")[0][1:]}


def stale_figures(done: dict[str, Any]) -> int | None:
    """How many figures a run found stale, from its summary's figure line."""
    found = re.search(r"(\d+) stale", done.get("figures", ""))
    return int(found[1]) if found else None


def time_serve(book: synthetic_book.Book, start_limit: float) -> dict[str, Any]:
    """`verified-book serve`: its start, and from a saved figure to its new mark, both ways."""
    page, right, wrong = one_figure(book)
    claim_id = right.partition("(claim:")[2].rstrip(")")
    url = f"{synthetic_book.page_name(book.pages // 2)}/"
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verified_book.integration.cli", "serve", "--port", str(port)],
        cwd=book.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env_for(),
    )
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(line) for line in proc.stdout or []], daemon=True).start()

    def marks() -> set[str]:
        """The marks the served page shows for the figure."""
        try:
            html = urllib.request.urlopen(f"http://127.0.0.1:{port}/{url}", timeout=60).read().decode()
        except OSError:
            return set()
        return {status for claim, status in MARK.findall(html) if claim == claim_id}

    out: dict[str, Any] = {}
    try:
        up = wait(lambda: any("serve: http://" in line for line in lines) or proc.poll() is not None, start_limit, 0.2)
        if up is None or proc.poll() is not None:
            return {"error": "serve did not start: " + "".join(lines)[-500:]}
        out["start_s"] = round(time.perf_counter() - started, 2)
        if wait(lambda: marks() == {"verified"}, 120) is None:
            return {**out, "error": f"{url}: {claim_id} is not marked verified after serve's first build"}
        save(page, right, wrong)
        to_stale = wait(lambda: marks() == {"stale"}, 600)
        save(page, wrong, right)
        to_verified = wait(lambda: marks() == {"verified"}, 600)
        out["to_stale_s"] = None if to_stale is None else round(to_stale, 3)
        out["to_verified_s"] = None if to_verified is None else round(to_verified, 3)
        out["peak_mb"] = _high_water_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


def _high_water_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return round(int(found.group(1)) / 1024, 1) if found else None


def _one_claim(results: Any) -> Any:
    """The records of one claim of `results` (its first), with their timings and metadata: what a run that
    rechecked one claim merges into the history."""
    from verified_book.records.record import RunHeader
    from verified_book.records.results import PER_RECORD, ResultsFile

    claim = min(results.records)
    header = results.run.model_dump(exclude_unset=True, exclude=set(PER_RECORD))
    run = RunHeader.model_validate(
        {**header, **{k: {claim: getattr(results.run, k).get(claim, {})} for k in PER_RECORD}}
    )
    meta = {claim: results.claims[claim]} if claim in results.claims else {}
    return ResultsFile(results.slug, results.machine, run, {claim: results.records[claim]}, {}, meta)


def records_timings(path: Path) -> dict[str, Any]:
    """A machine's own history, its store at `path`, and the exchange file it exports (this process): the store
    read whole, one claim's run merged into it and the whole history merged into it; the file's size, reading and
    checking it, merging it into a copy of itself and one claim's run into it (the history's cost before the
    store), and writing it."""
    from verified_book.records.results import MAX_FILE_BYTES, read
    from verified_book.records.store import Store
    from verified_book.records.writing import dumps, merge_into

    timed: dict[str, float] = {}

    def timing(name: str, work: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        done = work()
        timed[name] = round(time.perf_counter() - started, 3)
        return done

    with tempfile.TemporaryDirectory(prefix="scale-records-") as folder:
        exchange = Store(path).export(Path(folder) / "exchange" / f"{path.stem}.json")
        results = timing("read_s", lambda: read(exchange, own=True))
        one = _one_claim(results)
        (Path(folder) / "file").mkdir()
        copy = Path(folder) / "file" / exchange.name
        shutil.copy2(exchange, copy)
        timing("merge_s", lambda: merge_into(copy, results))
        timing("merge_one_s", lambda: merge_into(copy, one))
        timing("write_s", lambda: (Path(folder) / "written.json").write_text(dumps(results), encoding="utf-8"))
        (Path(folder) / "store").mkdir()
        kept = Path(folder) / "store" / path.name
        shutil.copy2(path, kept)
        timing("store_read_s", lambda: Store(kept).read())
        timing("store_merge_one_s", lambda: merge_into(kept, one))
        timing("store_merge_s", lambda: merge_into(kept, results))
        size = exchange.stat().st_size
    return {
        "bytes": size,
        "store_bytes": path.stat().st_size,
        # past the limit on files from others: the second run's `history_kept` shows the limit spares one's own
        "over_contributed_limit": size > MAX_FILE_BYTES,
        "records": sum(len(per) for per in results.records.values()),
        **timed,
    }


def time_records(path: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="scale-records-out-") as folder:
        out = Path(folder) / "records.json"
        done = step([sys.executable, str(Path(__file__).resolve()), "--records", str(path), str(out)], ROOT)
        if not out.exists():
            return {"error": done.get("error", "no figures written"), "exit_status": done["exit_status"]}
        return {**json.loads(out.read_text()), "peak_mb": done["peak_mb"]}


def time_site(book: synthetic_book.Book, results: Path, machines: int) -> dict[str, Any]:
    """The site build with `results` as `machines` machines: the first build of these files, and (`rebuild`) the
    same build again, which finds each file checked, the pages read and the claims' code fingerprinted by the
    first (`.cache/verified-book/`), as a site whose cache is kept between builds does."""
    with (
        tempfile.TemporaryDirectory(prefix="scale-fleet-") as fleet,
        tempfile.TemporaryDirectory(prefix="scale-one-") as one,
        tempfile.TemporaryDirectory(prefix="scale-site-") as site,
    ):
        shutil.copy2(results, Path(one) / results.name)
        fleet_of(Path(one), Path(fleet), machines - 1)
        shutil.rmtree(book.root / ".cache", ignore_errors=True)
        env = {**env_for(), "CLAIMS_RESULTS_DIR": fleet}
        mkdocs = str(Path(sys.executable).parent / "mkdocs")
        first = step([mkdocs, "build", "-q", "-d", site], book.root, env)
        first.update(site_bytes(Path(site)))
        return {**first, "rebuild": step([mkdocs, "build", "-q", "-d", site], book.root, env)}


def site_bytes(site: Path) -> dict[str, int]:
    """What a build publishes: every file's bytes, and the part of them in the data files a page's script loads
    (each page's panel rows, the machines page's matrix rows), which grow with machines × figures. A host may
    bound a published site (GitHub Pages: 1 GB)."""
    files = [p for p in site.rglob("*") if p.is_file()]
    data = [p for p in files if p.name.endswith(".panels.js") or ".matrix-" in p.name]
    return {"bytes": sum(p.stat().st_size for p in files), "data_bytes": sum(p.stat().st_size for p in data)}


def measure(
    scale: int, machines: list[int], skip_changed: bool, skip_serve: bool, skip_site: bool, start_limit: float
) -> dict[str, Any]:
    """Every figure of one size (less the steps skipped)."""
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    folder = Path(tempfile.mkdtemp(prefix=f"scale-{scale}x-"))
    try:
        book = synthetic_book.write(folder, scale * synthetic_book.PAGES_PER_SCALE)
        out.update(pages=book.pages, claims=book.claims, figures=book.figures)
        say(f"{scale}x: {book.pages} pages, {book.claims} claims, {book.figures} figures in {folder}")
        out["collection"] = step(pytest_cmd("--collect-only"), folder)
        say(f"  collection: {out['collection']['seconds']} s, {out['collection']['peak_mb']} MB")
        out["full_run"] = step(pytest_cmd(), folder)
        say(f"  full run: {out['full_run']['seconds']} s, {out['full_run']['peak_mb']} MB ({summary(out['full_run'])})")
        out["second_run"] = step(pytest_cmd(), folder)
        say(f"  second run: {out['second_run']['seconds']} s ({summary(out['second_run'])})")
        kept = sorted(p.name for p in (folder / "results.local").iterdir() if ".corrupt-" in p.name)
        out["history_kept"] = not kept
        if kept:
            say(f"  the second run set the first run's records aside: {', '.join(kept)}")
        if not skip_changed:
            changed = time_changed(book)
            out["changed"], out["changed_back"] = changed["edited"], changed["back"]
            say(
                f"  --changed after one figure edit: {changed['edited']['seconds']} s "
                f"({summary(changed['edited'])}); put back: {changed['back']['seconds']} s"
            )
            data = time_changed_data(book)
            out["changed_data"] = {**data["edited"], "stale_figures": stale_figures(data["edited"])}
            out["changed_data_back"] = data["back"]
            say(
                f"  --changed after one data value edit ({data['file']}:{data['key']}): "
                f"{data['edited']['seconds']} s, {out['changed_data']['stale_figures']} figures stale; "
                f"put back: {data['back']['seconds']} s"
            )
        if not skip_serve:
            out["serve"] = time_serve(book, start_limit)
            served = out["serve"]
            say(
                f"  serve: start {served.get('start_s')} s; saved wrong -> stale "
                f"{seconds_text(served.get('to_stale_s'))}; saved back -> verified "
                f"{seconds_text(served.get('to_verified_s'))}" + (f"; {served['error']}" if "error" in served else "")
            )
        (history,) = (folder / "results.local").glob(f"*{store.SUFFIX}")
        out["records"] = time_records(history)
        rec = out["records"]
        say(
            f"  results file: {rec.get('bytes', 0) / 1e6:.1f} MB"
            f"{' (past the limit on files from others)' if rec.get('over_contributed_limit') else ''}; "
            f"read {rec.get('read_s')} s, merge {rec.get('merge_s')} s (one claim {rec.get('merge_one_s')} s), "
            f"write {rec.get('write_s')} s"
        )
        say(
            f"  store: {rec.get('store_bytes', 0) / 1e6:.1f} MB; read {rec.get('store_read_s')} s, one claim merged "
            f"{rec.get('store_merge_one_s')} s, the whole history merged {rec.get('store_merge_s')} s"
        )
        results = store.Store(history).export(folder / "exported" / f"{history.stem}.json")
        if not skip_site:
            out["site"] = {}
            for n in machines:
                out["site"][str(n)] = time_site(book, results, n)
                built = out["site"][str(n)]
                again = built["rebuild"]
                say(
                    f"  site, {n} machine(s): {built['seconds']} s, {built['peak_mb']} MB "
                    f"(exit {built['exit_status']}); rebuilt: {again['seconds']} s, {again['peak_mb']} MB "
                    f"(exit {again['exit_status']})"
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def summary(done: dict[str, Any]) -> str:
    return str(done.get("summary") or f"exit {done['exit_status']}")


#: the figures whose growth is fitted, each by its name and where it is in one size's entry (its first key the step
#: it is of); the results file says where each is (`figures`), for whatever shows them
GROWTH: dict[str, tuple[str, ...]] = {
    "collection_s": ("collection", "seconds"),
    "full_run_s": ("full_run", "seconds"),
    "full_run_peak_mb": ("full_run", "peak_mb"),
    "second_run_s": ("second_run", "seconds"),
    "changed_s": ("changed", "seconds"),
    "changed_data_s": ("changed_data", "seconds"),
    "serve_start_s": ("serve", "start_s"),
    "serve_to_stale_s": ("serve", "to_stale_s"),
    "serve_to_verified_s": ("serve", "to_verified_s"),
    "results_bytes": ("records", "bytes"),
    "results_read_s": ("records", "read_s"),
    "results_merge_s": ("records", "merge_s"),
    "results_merge_one_s": ("records", "merge_one_s"),
    "results_write_s": ("records", "write_s"),
    "store_read_s": ("records", "store_read_s"),
    "store_merge_one_s": ("records", "store_merge_one_s"),
    "store_merge_s": ("records", "store_merge_s"),
    "site_1_machine_s": ("site", "1", "seconds"),
    "site_10_machines_s": ("site", "10", "seconds"),
    "site_50_machines_s": ("site", "50", "seconds"),
    "site_50_machines_peak_mb": ("site", "50", "peak_mb"),
    "site_1_machine_bytes": ("site", "1", "bytes"),
    "site_50_machines_bytes": ("site", "50", "bytes"),
    "site_50_machines_data_bytes": ("site", "50", "data_bytes"),
    "site_rebuild_1_machine_s": ("site", "1", "rebuild", "seconds"),
    "site_rebuild_50_machines_s": ("site", "50", "rebuild", "seconds"),
}


def figure(entry: dict[str, Any], path: Sequence[str]) -> Any:
    """The figure at `path` in one size's entry; None where that size did not measure it."""
    value: Any = entry
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(value) over log(size)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def exponents(sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each figure's growth exponent between 4x and 64x, over the sizes measured there (or over all sizes where
    fewer than two are), with the sizes it was fitted on."""
    out: dict[str, Any] = {}
    for name, path in GROWTH.items():
        points = []
        for size, entry in sizes.items():
            value = figure(entry, path)
            if isinstance(value, (int, float)) and value > 0:
                points.append((float(size), float(value)))
        fitted = [p for p in points if p[0] >= 4] if sum(p[0] >= 4 for p in points) >= 2 else points
        if len(fitted) >= 2:
            out[name] = {"exponent": round(slope(sorted(fitted)), 2), "sizes": [int(x) for x, _ in sorted(fitted)]}
    return out


def say(text: str) -> None:
    print(text, flush=True)


#: the steps a run may skip, by the option that skips them: the figures of each are `STEPS[step]` of an entry
SKIPPABLE = {"changed": "skip_changed", "serve": "skip_serve", "site": "skip_site"}
STEPS = {
    "changed": ("changed", "changed_back", "changed_data", "changed_data_back"),
    "serve": ("serve",),
    "site": ("site",),
}


def kept_from(before: dict[str, Any] | None, now: dict[str, Any], skipped: list[str]) -> dict[str, Any]:
    """A size's new entry, with the figures of each step it skipped kept from its entry `before`, each of those
    steps dated as measured (`earlier`: step -> date), so that a run of some steps loses none of the others."""
    if not before:
        return now
    for step in skipped:
        taken = {key: before[key] for key in STEPS[step] if key in before}
        if taken:
            now.update(taken)
            for key in STEPS[step]:
                now.setdefault("earlier", {})[key] = before.get("earlier", {}).get(key, before["date"])
    return now


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="times this book's size (default 1,4,16,64)")
    parser.add_argument(
        "--machines", default=",".join(map(str, MACHINES)), help="machines the site is built with (default 1,10,50)"
    )
    parser.add_argument("--skip-changed", action="store_true", help="do not time pytest --changed")
    parser.add_argument("--skip-serve", action="store_true", help="do not time verified-book serve")
    parser.add_argument("--skip-site", action="store_true", help="do not time the site builds")
    parser.add_argument("--start-limit", type=float, default=3600, help="seconds serve may take to start")
    parser.add_argument("--records", nargs=2, type=Path, metavar=("FILE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.records:  # one step's own process: see time_records
        args.records[1].write_text(json.dumps(records_timings(args.records[0])), encoding="utf-8")
        return 0
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    from verified_book.engine.machine import fingerprint, slug_of

    info = fingerprint()
    slug = slug_of(info)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    machines = [int(m) for m in args.machines.split(",") if m.strip()]
    say(f"scale benchmark on {slug} ({info.get('cpu')}, {info.get('cores')} CPUs): sizes {sizes}")

    out = ROOT / "benchmarks" / "results" / f"{slug}.json"
    kept = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"machine": slug}
    scale = kept.get("scale", {})
    measured = dict(scale.get("sizes", {}))
    skipped = [name for name, skip in SKIPPABLE.items() if getattr(args, skip)]
    for size in sizes:
        now = measure(size, machines, args.skip_changed, args.skip_serve, args.skip_site, args.start_limit)
        measured[str(size)] = kept_from(measured.get(str(size)), now, skipped)
        scale = {
            "machine": slug,
            "cpu": info.get("cpu"),
            "cores": info.get("cores"),
            "sizes": dict(sorted(measured.items(), key=lambda kv: int(kv[0]))),
            "exponents": exponents(measured),
            "figures": {name: list(path) for name, path in GROWTH.items()},
        }
        kept = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"machine": slug}
        kept["scale"] = scale
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n", encoding="utf-8")  # after each size
    say("growth exponents (slope of log value over log size):")
    for name, fit in scale.get("exponents", {}).items():
        say(f"  {name}: {fit['exponent']} (sizes {', '.join(map(str, fit['sizes']))})")
    say(f"written: {out.relative_to(ROOT)} (scale)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
