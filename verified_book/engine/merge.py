"""Check results files from other machines and merge them into the book's results folder.

    verified-book merge-results [--into DIR] [--check-only] [--keep-newer] FILE.json ...

Every file is checked before any is merged, and one bad file stops the merge: nothing
is written, and each problem is printed as `FILE: what is wrong`. A file must

- parse as JSON, with no NaN or Infinity, within the results store's size limits;
- have the results schema (verified_book.records.results.validate): a safe machine slug equal to the
  file's name, known backends and statuses, finite numbers, ISO dates, safe paths;
- name only claims this book declares, each with the kind the book gives it;
- hold plausible values for the measured claims, where the book names a check for them
  (`plausible` in book.toml: a function of the claim id and the value that says why a value
  is implausible, or None).

A sound file is then merged into DIR/<slug>.json (default: the book's results folder) under
the store's lock: its records replace those of the same claim and backend, others are kept.
With --keep-newer a record replaces one only if it is not older (by the date of the run that
made it), so merging an old copy over a newer one changes nothing: the order in which files
arrive does not matter.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import sys
import tempfile
from pathlib import Path
from typing import Callable, cast

from verified_book.authoring.registry import REGISTRY
from verified_book.engine.config import BookConfig, ConfigError, find_root, open_book, read_config
from verified_book.records import store, unsaved
from verified_book.records.record import Record, revised
from verified_book.records.results import PER_RECORD, ResultsError, ResultsFile, merge_into, read, same_machine
from verified_book.vocabulary import Status

Plausible = Callable[[str, object], "str | None"]


def plausibility(book: BookConfig) -> Plausible:
    """The book's check of measured values (`plausible = "module:function"` in book.toml), or none."""
    if not book.plausible:
        return lambda claim_id, value: None
    module, _, name = book.plausible.partition(":")
    try:
        return cast(Plausible, getattr(importlib.import_module(module), name))
    except (ImportError, AttributeError) as e:
        raise ConfigError(
            f"{book.root / 'book.toml'}: plausible = {book.plausible!r} does not name a function: {e}"
        ) from None


def problems_of(
    path: Path, known: set[str], plausible: Plausible | None = None
) -> tuple[ResultsFile | None, list[str]]:
    """(the file, []) when sound, else (None, every problem as 'file: what')."""
    try:
        results = read(path, known)
    except ResultsError as e:
        return None, str(e).splitlines()
    problems = []
    for line in results.run.environment_errors or []:
        problems.append(
            f"{path}: its latest run ({results.run.date or 'undated'}) did not check everything, "
            f"because {line}; its records are not contributed until a run whose environment held"
        )
    for claim_id, per_backend in results.records.items():
        claim = REGISTRY[claim_id]
        for backend, record in per_backend.items():
            at = f"{path}: records[{claim_id!r}][{backend!r}]"
            meta = results.claims.get(claim_id)
            kind = meta.kind if meta is not None else None
            if kind is not None and kind != claim.kind.value:
                problems.append(f"{at}: kind {kind!r}, but the book declares {claim_id} as {claim.kind.value!r}")
            if not claim.runs_on(backend):
                problems.append(f"{at}: {claim_id} is not computed on {backend}")
            if plausible is not None and record.status in (Status.VERIFIED, Status.DISPUTED, Status.STALE):
                why = plausible(claim_id, record.value)
                if why:
                    problems.append(f"{at}: {why}")
    return (results if not problems else None), problems


def _when(results: ResultsFile, claim_id: str, backend: str) -> dt.datetime | None:
    date = results.date_of(claim_id, backend) if backend in results.records.get(claim_id, {}) else None
    try:
        when = dt.datetime.fromisoformat(date) if isinstance(date, str) else None
    except ValueError:
        return None
    return when.replace(tzinfo=dt.timezone.utc) if when is not None and when.tzinfo is None else when


def newer_only(results: ResultsFile, target: Path) -> ResultsFile:
    """`results` without the records that are older than the same claim and backend in `target`."""
    if not target.exists():
        return results
    try:
        current = read(target, own=True)  # the store merged into, not a contributed file
    except ResultsError:
        return results  # merge_into sets a corrupt file aside and says so
    kept: dict[str, dict[str, Record]] = {}
    for claim_id, per_backend in results.records.items():
        for backend, record in per_backend.items():
            old = _when(current, claim_id, backend)
            new = _when(results, claim_id, backend)
            if old is None or new is None or new >= old:
                kept.setdefault(claim_id, {})[backend] = record
    # the run header's dates and timings of the records left out go with them, or they would date the newer ones
    run = revised(
        results.run,
        **{
            key: {
                c: {b: v for b, v in per.items() if b in kept.get(c, {})}
                for c, per in getattr(results.run, key).items()
            }
            for key in PER_RECORD
        },
    )
    return ResultsFile(results.slug, results.machine, run, kept, results.outputs, results.claims)


def _other_machine(results: ResultsFile, target: Path) -> str | None:
    """Why `results` may not go into `target`: it holds another machine's records (or is unreadable: then
    merge_into sets it aside and says so)."""
    if not target.exists():
        return None
    try:
        current = read(target, own=True)
    except ResultsError:
        return None
    why = same_machine(current, results)
    return f"{target} {why}" if why else None


def main(argv: list[str] | None = None, book: BookConfig | None = None, name: str = "merge-results") -> int:
    """`verified-book merge-results`, or a job that merges through it (`contribute`): each line it says
    begins with `name`, the command the reader ran."""
    parser = argparse.ArgumentParser(prog="verified-book merge-results", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.json")
    parser.add_argument(
        "--into",
        type=Path,
        default=None,
        metavar="DIR",
        help="the results folder to merge into (default: the book's results folder)",
    )
    parser.add_argument("--check-only", action="store_true", help="check the files; merge nothing")
    parser.add_argument(
        "--keep-newer",
        action="store_true",
        help="never replace a record with an older one (by the date of the run that made it)",
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:  # the book stays open until the merge is done
        try:
            if book is None:
                root = find_root(Path.cwd())
                if root is None:
                    print(f"{name}: no book.toml in {Path.cwd()} or above", file=sys.stderr)
                    return 2
                book = read_config(root)
            opened = open_book(book)
            errors = opened.load_errors
            stack.enter_context(opened.opened())
            plausible = plausibility(book)
        except ConfigError as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 2
        if errors:
            print(f"{name}: the book's claims do not load, so no file can be checked:", file=sys.stderr)
            print("\n".join(f"  {line}" for line in errors), file=sys.stderr)
            return 2
        known = set(REGISTRY.ids())
        into = args.into or book.results
        sound = _sound_files(args.files, known, plausible, None if args.check_only else into, name)
        if sound is None:
            return 1
        for path, results in sound:
            if not _merge_one(path, results, into, args.check_only, args.keep_newer, name):
                return 1
        return 0


def contributed(local: Path) -> list[Path]:
    """What `contribute` takes from this clone: its machines' own histories (stores, and results files not yet
    taken into one), then the records runs kept in the user's state folder because they could not write them
    there (verified_book.records.unsaved)."""
    if not local.is_dir():
        return unsaved.meant_for_folder(local)
    stores = sorted(local.glob(f"*{store.SUFFIX}"))
    files = [p for p in local.glob("*.json") if p.with_suffix(store.SUFFIX) not in stores]
    return sorted(stores + files) + unsaved.meant_for_folder(local)


def contribute(files: list[Path], into: Path, args: list[str], book: BookConfig, name: str) -> int:
    """Merge this clone's files into `into` (see `contributed`): its histories as `args` ask (a store exported to
    the exchange file, `<slug>.json`, checked and merged as any contributed file), then each run's unsaved
    records, never replacing a newer record (`--keep-newer`), so whenever they were made the newest record of
    each claim and backend is the one kept. They stay where they are, for the next run to take in."""
    kept = [path for path in files if path.is_relative_to(unsaved.folder())]
    with tempfile.TemporaryDirectory(prefix="verified-book-contribute-") as exported:
        local = []
        for path in (p for p in files if p not in kept):
            if store.is_store(path):
                said: list[str] = []
                try:
                    path = store.Store(path).export(Path(exported) / f"{path.stem}.json", said.append)
                except ResultsError as e:
                    print(f"{name}: refused {path}: {e}", file=sys.stderr)
                    return 1
                finally:
                    for line in said:
                        print(f"{name}: {line}", file=sys.stderr)
            local.append(path)
        code = main([*map(str, local), "--into", str(into), *args], book=book, name=name) if local else 0
    for path in kept:
        if code:
            break
        print(f"{name}: {path} holds records a run could not write to its results folder; they go in too")
        rest = [a for a in args if a != "--keep-newer"]
        code = main([str(path), "--into", str(into), "--keep-newer", *rest], book=book, name=name)
    return code


def _sound_files(
    files: list[Path], known: set[str], plausible: Plausible | None, into: Path | None, name: str
) -> list[tuple[Path, ResultsFile]] | None:
    """Each file with its checked results, or None when any is refused (each refusal said on stderr).
    Given `into`, a file of a machine other than the one its target holds is refused too."""
    sound: list[tuple[Path, ResultsFile]] = []
    refused = 0
    slugs: dict[str, Path] = {}
    for path in files:
        results, problems = problems_of(path, known, plausible)
        if results is not None and results.slug in slugs:
            problems = [f"{path}: holds machine {results.slug!r}, as {slugs[results.slug]} does; merge one at a time"]
            results = None
        if results is not None and into is not None:
            other = _other_machine(results, into / f"{results.slug}.json")
            if other:
                problems, results = [f"{path}: {other}"], None
        if results is None:
            refused += 1
            print(f"{name}: refused {path}:", file=sys.stderr)
            for line in problems[:50]:
                print(f"  {line}", file=sys.stderr)
            if len(problems) > 50:
                print(f"  ... and {len(problems) - 50} more", file=sys.stderr)
            continue
        slugs[results.slug] = path
        sound.append((path, results))
    if refused:
        print(f"{name}: {refused} of {len(files)} file(s) refused; nothing merged", file=sys.stderr)
        return None
    return sound


def _merge_one(path: Path, results: ResultsFile, into: Path, check_only: bool, keep_newer: bool, name: str) -> bool:
    """Merge one checked file into its machine's file under `into` (or only say it is sound); False when
    the merge is refused or cannot be written, with why on stderr."""
    counts = results.counts()
    summary = f"{sum(counts.values())} records, one per claim × backend: " + ", ".join(
        f"{n} {s}" for s, n in counts.items() if n
    )
    if check_only:
        print(f"{name}: {path}: sound ({results.slug}: {summary})")
        return True
    target = into / f"{results.slug}.json"
    if keep_newer:
        results = newer_only(results, target)
        if not results.records:
            print(f"{name}: {path}: nothing newer than {target}; kept as it is")
            return True
    warnings: list[str] = []
    try:
        merge_into(target, results, warn=warnings.append)
    except ResultsError as e:  # what changed between the check and the merge: nothing of this file is merged
        print(f"{name}: refused {path}: {e}", file=sys.stderr)
        return False
    except OSError as e:  # the results folder cannot be written: the records stay where they were
        print(
            f"{name}: {path} not merged into {target}: {e.strerror or e}; nothing of it was written, "
            f"and {path} is left as it was",
            file=sys.stderr,
        )
        return False
    for line in warnings:
        print(f"{name}: {line}", file=sys.stderr)
    print(f"{name}: {path} -> {target} ({summary})")
    return True


if __name__ == "__main__":
    sys.exit(main())
