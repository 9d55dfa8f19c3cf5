#!/usr/bin/env python3
"""How long `verified-book serve` takes from a saved file to the new mark in the served HTML, on this machine.

    .venv/bin/python benchmarks/serve.py [--rounds N]

Copies the book (its tracked files) into a temporary folder, starts `verified-book serve` there on a
free port of 127.0.0.1, waits for its first build, then, `--rounds` times (3 by default):

1. a page edit: one verified figure of book/hardware.md is printed wrong (its first digit changed)
   and the served page is polled until that figure's mark reads stale; then it is put back and
   polled until it reads verified again. Target: within 1 s of saving.
2. a data edit: `memory_bandwidth` of claims/data/hardware/dgx_spark.toml is changed (273 to 274 GB/s)
   and every served page is polled until the marks of the figures that read it have changed; then it
   is put back and polled until the marks are the first build's again. Target: within 3 s for about
   20 figures; the figures touched are counted from serve's own line.

Each time is from the write to the first poll that shows the new marks (polls every 20 ms). Every
wait is bounded; serve is stopped and the copy removed at the end. The medians, each round's
figures and the targets are merged into benchmarks/results/<machine-slug>.json under `serve`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
PAGE_TARGET_S = 1.0
DATA_TARGET_S = 3.0
PAGE = "book/hardware.md"
DATA = "claims/data/hardware/dgx_spark.toml"
DATA_FROM, DATA_TO = "value = 273\n", "value = 274\n"
MARK = re.compile(r'data-claim="([a-z0-9_.]+)" data-status="([a-z ]+)"')
FIGURE = re.compile(r"\[(\d[^\]]*)\]\(claim:([a-z0-9_.]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def copy_book(into: Path) -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def wait(condition: Callable[[], bool], limit: float, poll: float = 0.02) -> float | None:
    """Seconds until `condition` holds, or None past `limit`."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        if condition():
            return time.perf_counter() - start
        time.sleep(poll)
    return None


def seconds_text(seconds: float | None) -> str:
    """A wait as the round lines print it: milliseconds' precision, or that the limit passed first."""
    return "not within the limit" if seconds is None else f"{seconds:.3f} s"


def save(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--start-limit", type=float, default=900, help="seconds serve may take to start")
    args = parser.parse_args(argv)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    from verified_book.engine.machine import fingerprint, slug_of

    slug = slug_of(fingerprint())
    folder = Path(tempfile.mkdtemp(prefix="verified-book-serve-bench-"))
    copy_book(folder)
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "PYTHONPATH": str(folder), "NO_MKDOCS_2_WARNING": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verified_book.integration.cli", "serve", "--port", str(port)],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(line) for line in proc.stdout or []], daemon=True).start()

    def html(url: str) -> str:
        try:
            return urllib.request.urlopen(base + url, timeout=30).read().decode()
        except OSError:
            return ""

    # the offline plugin writes page.html, not folders
    pages = {
        p: p.removeprefix("book/").removesuffix(".md") + ".html"
        for p in sorted(
            str(p.relative_to(folder)) for p in (folder / "book").rglob("*.md") if "snippets" not in p.parts
        )
    }

    def marks(page: str) -> list[tuple[str, str]]:
        return MARK.findall(html(pages[page]))

    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rounds": args.rounds,
        "targets_s": {"page_edit": PAGE_TARGET_S, "data_edit": DATA_TARGET_S},
    }
    try:
        if (
            wait(
                lambda: any("serve: http://" in line for line in lines) or proc.poll() is not None,
                args.start_limit,
                poll=0.2,
            )
            is None
            or proc.poll() is not None
        ):
            print("".join(lines)[-3000:])
            raise SystemExit("serve did not start")
        report["start_s"] = round(time.perf_counter() - started, 2)
        print(f"serve started in {report['start_s']} s: {lines[-2].strip() if len(lines) > 1 else ''}", flush=True)
        first = {p: marks(p) for p in pages}

        page = folder / PAGE
        before = marks(PAGE)
        status = dict(before)
        text, claim_id = next(
            (t, c)
            for t, c in FIGURE.findall(page.read_text())
            if status.get(c) == "verified" and t[0] in "123456789" and before.count((c, "verified")) == 1
        )
        wrong = str(int(text[0]) % 9 + 1) + text[1:]
        old, new = f"[{text}](claim:{claim_id}", f"[{wrong}](claim:{claim_id}"
        page_times, data_times, touched = [], [], []
        for n in range(args.rounds):
            save(page, old, new)
            page_times.append(wait(lambda: (claim_id, "stale") in marks(PAGE), 30))
            save(page, new, old)
            back = wait(lambda: marks(PAGE) == before, 30)
            print(
                f"  round {n + 1}: page edit {seconds_text(page_times[-1])} to stale "
                f"({PAGE}: {text} -> {wrong}, {claim_id}), {seconds_text(back)} back to verified",
                flush=True,
            )

            seen = len(lines)
            data = folder / DATA
            save(data, DATA_FROM, DATA_TO)
            data_times.append(
                wait(
                    lambda seen=seen: (
                        any(marks(p) != first[p] for p in pages)
                        and any("dgx_spark.toml saved" in line for line in lines[seen:])
                    ),
                    60,
                )
            )
            said = next((line for line in lines[seen:] if "dgx_spark.toml saved" in line), "")
            count = re.search(r"(\d+) figure\(s\) touched", said)
            touched.append(int(count.group(1)) if count else None)
            save(data, DATA_TO, DATA_FROM)
            back = wait(lambda: all(marks(p) == first[p] for p in pages), 60)
            print(
                f"  round {n + 1}: data edit {seconds_text(data_times[-1])} ({touched[-1]} figures touched), "
                f"{seconds_text(back)} back",
                flush=True,
            )
            print("    serve: " + said.strip(), flush=True)

        def median(values: list[float | None]) -> float | None:
            found = [v for v in values if v is not None]
            return round(statistics.median(found), 3) if len(found) == len(values) else None

        report["page_edit"] = {
            "seconds": median(page_times),
            "each": [round(t, 3) if t else None for t in page_times],
            "page": PAGE,
            "figure": f"{text} ({claim_id})",
        }
        report["data_edit"] = {
            "seconds": median(data_times),
            "each": [round(t, 3) if t else None for t in data_times],
            "file": DATA,
            "key": "memory_bandwidth",
            "figures_touched": touched,
        }
        report["met"] = {
            "page_edit_within_1_s": report["page_edit"]["seconds"] is not None
            and report["page_edit"]["seconds"] <= PAGE_TARGET_S,
            "data_edit_within_3_s": report["data_edit"]["seconds"] is not None
            and report["data_edit"]["seconds"] <= DATA_TARGET_S,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"page edit to mark: {report['page_edit']['seconds']} s (target {PAGE_TARGET_S} s: "
        f"{'met' if report['met']['page_edit_within_1_s'] else 'NOT met'})"
    )
    print(
        f"data edit to marks: {report['data_edit']['seconds']} s for {touched[0]} figures (target {DATA_TARGET_S} s: "
        f"{'met' if report['met']['data_edit_within_3_s'] else 'NOT met'})"
    )
    out = ROOT / "benchmarks" / "results" / f"{slug}.json"
    kept = json.loads(out.read_text()) if out.is_file() else {"machine": slug}
    kept["serve"] = report
    out.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"written: {out.relative_to(ROOT)} (serve)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
