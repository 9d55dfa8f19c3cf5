"""`verified-book JOB`: the book's jobs as one command, run from anywhere inside a book.

`verified-book JOB --help` says more of one job. Ctrl-C stops a run as it stops pytest: the records
judged so far are written, and the command exits 130. `run.py` at a book's root sets up a virtual
environment and calls this.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, NoReturn

from verified_book.engine.config import BookConfig, ConfigError, find_root, read_config
from verified_book.engine.environment import broken_by
from verified_book.integration import init_book
from verified_book.vocabulary import Status

INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C (128 + SIGINT)
PYTEST_INTERRUPTED = 2  # pytest.ExitCode.INTERRUPTED
PYTEST_USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR: the command line was refused, nothing ran
PYTEST_NO_TESTS = 5  # pytest.ExitCode.NO_TESTS_COLLECTED: the arguments selected nothing, nothing ran


def _book() -> BookConfig:
    root = find_root(Path.cwd())
    if root is None:
        raise SystemExit(f"verified-book: no book.toml in {Path.cwd()} or any folder above it; run this inside a book")
    try:
        return read_config(root)
    except ConfigError as e:
        raise SystemExit(f"verified-book: {e}") from None


#: set for the jobs where the reader has not set them: Material's notice about MkDocs 2 is not the reader's business
QUIET = {"NO_MKDOCS_2_WARNING": "1"}


def _quiet_here() -> None:
    """`QUIET` in this process's environment, where the reader has not set it (for MkDocs run in-process)."""
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)


def _env() -> dict[str, str]:
    """This process's environment with `QUIET`, for a job's child process."""
    return {**QUIET, **os.environ}


class _Outcome:
    """A pytest plugin that keeps what the run found once it ends (pytest's config dies with the run)."""

    def __init__(self) -> None:
        self.figures: dict[str, int] = {}
        self.bound = 0  # the book's bound figures, of which the run selected `figures`
        self.written: Path | None = None
        self.unkept: str | None = None  # why the records are not in the results file, and where they are
        self.broken: list[str] = []  # what the environment lost during the run, a line each
        self.slug = ""
        self.otherwise = 0  # figures that hold here and that other machines' records show otherwise

    def pytest_unconfigure(self, config: Any) -> None:
        from verified_book.engine.figure_status import shown_otherwise_after
        from verified_book.engine.run_summary import figure_counts
        from verified_book.integration.pytest.stash import STATE

        if STATE not in config.stash:
            return
        run = config.stash[STATE]
        self.figures = figure_counts(run.tally.figure_statuses, run.tally.figures_selected)
        self.bound = run.bound_figures
        written = run.written or (Path(sorted(run.tally.written)[0]) if run.tally.written else None)
        self.written = None if run.unkept else written
        self.unkept = run.unkept
        self.broken = [b.line() for b in run.broken()]
        self.slug = run.machine.slug
        with run.opened_book.opened():
            self.otherwise = len(
                shown_otherwise_after(run.book.bindings(), self.written, run.book_config.results, run.root)
            )


class _Named:
    """A pytest plugin that names the job in pytest's usage line and errors: `verified-book verify: error: ...`,
    not `pytest.main(): error: ...`, which names nothing the reader typed."""

    def __init__(self, job: str) -> None:
        self.prog = f"verified-book {job}"

    def pytest_addoption(self, parser: Any) -> None:
        parser.prog = self.prog


def pytest_run(args: list[str], outcome: _Outcome | None = None, job: str = "test") -> int:
    """pytest in this process, as the `job` the reader ran; its exit code, with an interrupted run's as 130."""
    import pytest

    code = int(pytest.main(args, plugins=[_Named(job), *([outcome] if outcome else [])]))
    return INTERRUPTED if code == PYTEST_INTERRUPTED else code


def site(book: BookConfig, args: list[str]) -> int:
    """`mkdocs build --strict` at the book's root, in this process: after `verify`'s checks the
    book's modules are loaded already, and the site needs no backend of its own."""
    _quiet_here()
    try:
        import click
        from mkdocs.__main__ import cli as mkdocs
    except ImportError as e:
        broken = broken_by(e)
        print(f"verified-book: site not built: {broken.line() if broken else e}", file=sys.stderr)
        return 1

    try:
        mkdocs.main(args=["build", "--strict", *args], prog_name="mkdocs", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:  # a failed build (strict warnings, a plugin's error), said as mkdocs says it
        e.show()
        return e.exit_code
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception as e:  # noqa: BLE001 - a crash inside the build fails it, as `mkdocs build` would, and verify still says so
        broken = broken_by(e)
        if broken is not None:  # the build's own environment broke: one line, not a traceback
            print(f"verified-book: site not built: {broken.line()}", file=sys.stderr)
            return 1
        traceback.print_exc()
        return 1
    return 0


def verify_paths(book: BookConfig) -> list[str]:
    """What verifies the book: its claims (book.toml), its pages' figures, its snippets; not the engine's tests."""
    paths = [str(book.root / "book.toml"), str(book.pages)]
    if not book.snippets.is_relative_to(book.pages):
        paths.append(str(book.snippets))
    return paths


def verdict(outcome: _Outcome, tested: int, built: int, book: BookConfig) -> str:
    """The last lines of `verify`: what held on this machine in its first line, then the figures, where the site
    is and where the records are, each on lines of its own that fit a terminal (SUMMARY_WIDTH)."""
    from verified_book.engine.figure_status import otherwise_words
    from verified_book.engine.kept_records import book_held, records_words
    from verified_book.engine.run_summary import figure_line
    from verified_book.engine.terminal_text import verdict_lines

    machine = f" on {outcome.slug}" if outcome.slug else ""
    where_site = f"site: {book.root / 'site' / 'index.html'}" if built == 0 else f"site build failed (exit {built})"
    where_results = records_words(book.shown(outcome.written) if outcome.written else None, outcome.unkept)
    state = _held(outcome.figures) if book_held(tested, outcome.unkept) else f"NOT all {Status.VERIFIED}"
    otherwise = otherwise_words(outcome.otherwise)
    parts = [figure_line(outcome.figures, outcome.bound), *([otherwise] if otherwise else [])]
    parts += [where_site, where_results]
    return verdict_lines(f"verified-book: {state}{machine}", parts)


def interrupted_verdict(outcome: _Outcome, book: BookConfig) -> str:
    """The last lines of a `verify` stopped by Ctrl-C: what it judged before it stopped, what it never reached
    counted apart from what this machine cannot compute, and where the records of what ran are kept, laid out
    as `verdict` lays out its lines."""
    from verified_book.engine.run_summary import figure_line
    from verified_book.engine.terminal_text import verdict_lines

    machine = f" on {outcome.slug}" if outcome.slug else ""
    if not sum(outcome.figures.values()):
        found = "while collecting, before any figure was checked"
    else:
        found = figure_line(outcome.figures, outcome.bound)
    kept = f" in {book.shown(outcome.written)}" if outcome.written else ""
    parts = [found, f"the records judged so far are kept{kept}"]
    return verdict_lines(f"verified-book: interrupted{machine}", parts)


def _held(figures: Mapping[str, int]) -> str:
    """A run that held, in a word it earned: `verified` only where it compared a figure with a value computed
    here (a `--changed` that found nothing changed, or a `-k` that selected only cited figures, did not)."""
    if not sum(figures.values()):
        return "no figure checked"
    if not figures.get(Status.VERIFIED):
        return "none stale or failed"
    return Status.VERIFIED


#: what the book's checks never use, kept out of `verify`: pytest's cache and assertion rewriting (the checks
#: raise their own errors; the hook would inspect every module imported), the hooks that watch tests for
#: unraisable and thread exceptions (a check's own error is its outcome; the first collects the garbage at the
#: end of every run), and the plugins of the engine's own test suite, which a reader's `verify` never calls.
VERIFY_OPTIONS = tuple(
    "-p no:cacheprovider --assert=plain -p no:unraisableexception -p no:threadexception "
    "-p no:hypothesispytest -p no:regressions -p no:pytest-datadir".split()
)


def verify(book: BookConfig, args: list[str]) -> int:
    outcome = _Outcome()
    tested = pytest_run([*VERIFY_OPTIONS, *verify_paths(book), *args], outcome, "verify")
    if tested == INTERRUPTED:
        print(interrupted_verdict(outcome, book), file=sys.stderr)
        return INTERRUPTED
    # nothing ran: a site and a verdict would speak of a run that did not happen
    if tested == PYTEST_USAGE_ERROR:
        print("verified-book: nothing was checked (see the error above); the site is left as it was", file=sys.stderr)
        return tested
    if tested == PYTEST_NO_TESTS:
        print(
            "verified-book: the arguments selected none of the book's checks, so nothing was checked; the site is "
            "left as it was",
            file=sys.stderr,
        )
        return tested
    built = site(book, [])
    print(verdict(outcome, tested, built, book), flush=True)
    for line in outcome.broken:
        print(f"verified-book: {line}", flush=True)
    if outcome.broken:
        print("verified-book: `contribute` takes no run whose environment broke: rerun verify once it is mended")
    elif book.local_results and outcome.written and outcome.written.is_relative_to(book.local_results):
        print(
            "verified-book: to contribute these records: verified-book contribute (then a pull request with results/)"
        )
    return tested or built or (1 if outcome.unkept else 0)


#: the most workers `test` starts on its own: each loads the book and its libraries, so past a few the start costs
#: more than the workers win back
TEST_WORKERS = 4


def _distribution_said(args: list[str]) -> bool:
    """Whether the reader's arguments say how the run is distributed: `-n`, `--numprocesses`, `--dist`, or
    xdist turned off (`-p no:xdist`)."""
    plugins_off = {args[i + 1] for i, flag in enumerate(args[:-1]) if flag == "-p"}
    plugins_off |= {a[2:] for a in args if a.startswith("-p") and len(a) > 2}
    return "no:xdist" in plugins_off or any(
        a.startswith(("-n", "--numprocesses", "--dist")) and not a.startswith("--no") for a in args
    )


def workers_for(args: list[str]) -> list[str]:
    """The whole suite on every usable CPU (up to TEST_WORKERS) through pytest-xdist, unless the reader's
    arguments say how to distribute it (`-n 0` runs it in this process) or xdist is not installed."""
    from importlib.util import find_spec

    from verified_book.engine.machine import usable_cpus

    cpus = min(usable_cpus(), TEST_WORKERS)
    if _distribution_said(args) or cpus < 2 or find_spec("xdist") is None:
        return []
    return ["-n", str(cpus)]


def test(book: BookConfig, args: list[str]) -> int:
    return pytest_run([*workers_for(args), *args])


def serve(book: BookConfig, args: list[str]) -> int:
    """The live preview (verified_book.integration.serve), in this process."""
    from verified_book.integration import serve as serve_mod

    _quiet_here()
    return serve_mod.serve(book, args)


#: what `contribute` passes on to the merge; the files and the folder are its own to name
CONTRIBUTE_OPTIONS = ("--check-only", "--keep-newer")


def contribute(book: BookConfig, args: list[str]) -> int:
    """Check this clone's own results files and merge them into the committed results folder."""
    from verified_book.engine import merge

    unknown = [a for a in args if a not in CONTRIBUTE_OPTIONS]
    if unknown:
        print(
            f"verified-book contribute: expected {' or '.join(CONTRIBUTE_OPTIONS)}, found {' '.join(unknown)}; it "
            f"merges {book.shown(book.local_results or book.results)}/ into {book.shown(book.results)}/ (files of "
            "other machines: verified-book merge-results FILE...)",
            file=sys.stderr,
        )
        return 2
    local = book.local_results
    if local is None:
        print(
            f"verified-book: {book.root / 'book.toml'} names no local_results folder: runs write to "
            f"{book.shown(book.results)} already",
            file=sys.stderr,
        )
        return 2
    files = merge.contributed(local)
    if not files:
        print(
            f"verified-book: nothing to contribute: {book.shown(local)}/ holds no results file; "
            "run `verified-book verify` first",
            file=sys.stderr,
        )
        return 1
    code = merge.contribute(files, book.results, args, book, "verified-book contribute")
    if code == 0 and "--check-only" not in args:
        print(
            f"verified-book: now commit {book.shown(book.results)}/ (git add {book.shown(book.results)}) and open a "
            "pull request"
        )
    return code


def machine(book: BookConfig, args: list[str]) -> int:
    """This machine's identity: its name and id, where it is kept; `--adopt FILE` takes a committed
    machine's identity as this machine's (it is that machine, and its identity file was lost)."""
    from verified_book.engine import machine as machine_mod
    from verified_book.records import identity
    from verified_book.records.results import ResultsError, hardware, machine_id, machine_words, read

    info = machine_mod.fingerprint()
    path = identity.default_path()
    if args[:1] == ["--adopt"] and len(args) == 2:
        try:
            committed = read(Path(args[1]))
        except ResultsError as e:
            print(f"verified-book machine: {e}", file=sys.stderr)
            return 2
        changes = identity.differences(hardware(committed), identity.hardware_of(info))
        if changes:
            print(
                f"verified-book machine: {args[1]} holds {machine_words(committed)}, whose hardware is not this "
                f"machine's ({'; '.join(changes)}); it stays that machine's",
                file=sys.stderr,
            )
            return 1
        try:
            adopted = identity.adopt(path, committed.slug, machine_id(committed), info)
        except identity.IdentityError as e:
            print(f"verified-book machine: {e}", file=sys.stderr)
            return 1
        print(f"verified-book machine: this machine is {adopted.name} (id {adopted.id}) again, kept in {path}")
        return 0
    if args:
        print("verified-book machine: usage: verified-book machine [--adopt results/NAME.json]", file=sys.stderr)
        return 2
    try:
        kept, notice = identity.this_machine(machine_mod.slug_of(info), info, path)
    except identity.IdentityError as e:
        print(f"verified-book machine: {e}", file=sys.stderr)
        return 1
    if notice:
        print(f"verified-book machine: {notice}")
    print(f"verified-book machine: {kept.name} (id {kept.id}; {identity.describe(kept.hardware)}), kept in {path}")
    return 0


def merge_results(book: BookConfig, args: list[str]) -> int:
    from verified_book.engine import merge

    return merge.main(args, book=book)


def plan(book: BookConfig, args: list[str]) -> int:
    """The plan for one of the book's machines, from the claims and the profile: no library loaded, and
    pytest not imported."""
    from verified_book.engine.plan import PlanError, book_plan

    if len(args) != 1 or args[0].startswith("-"):
        from verified_book.engine.config import open_book
        from verified_book.engine.machine import profiles

        with open_book(book).opened():
            machines = ", ".join(profiles())
        print(
            f"verified-book plan: expected one machine's marker, found {' '.join(args) or 'none'}; the book's "
            f"machines are {machines}",
            file=sys.stderr,
        )
        return 2
    try:
        lines, errors = book_plan(book, args[0], option="verified-book plan")
    except PlanError as e:
        print(e, file=sys.stderr)
        return 4  # as pytest's usage error, which `plan` answered with before
    try:
        print("\n".join([*lines, *(f"load error: {e}" for e in errors)]), flush=True)
    except BrokenPipeError:  # the reader closed the pipe (`| head`): what it read is what it wanted
        pass
    return 1 if errors else 0


def fault_table(book: BookConfig, args: list[str]) -> int:
    """The fault scenarios live in the checkout's test harness (tests/harness), not in the package."""
    tests = book.root / "tests"
    if not (tests / "harness" / "fault_table.py").is_file():
        print(
            f"verified-book: fault-table runs the test harness of a checkout ({tests}/harness/fault_table.py), "
            "which this book does not have; run it from a clone of the project",
            file=sys.stderr,
        )
        return 2
    try:
        return subprocess.run([sys.executable, "-m", "harness.fault_table", *args], cwd=tests, env=_env()).returncode
    except KeyboardInterrupt:
        return INTERRUPTED


def pages(book: BookConfig, args: list[str]) -> int:
    """`verified-book pages`: what the MkDocs plugin generates, written where Zensical reads it."""
    if args:
        print(f"verified-book pages: expected no arguments; found {' '.join(args)}", file=sys.stderr)
        return 2
    _quiet_here()
    config_file = book.root / "mkdocs.yml"
    try:
        from mkdocs.exceptions import MkDocsException

        from verified_book.integration import mkdocs_plugin
        from verified_book.site import build as site_book
    except ImportError as e:
        print(f"verified-book pages: MkDocs is not installed here ({e}); install the `site` extra", file=sys.stderr)
        return 1
    try:
        written, plugin = mkdocs_plugin.generated_pages(config_file)
        files = site_book.write_pages(book.root, plugin.docs, written, site_book.engine_assets())
    except (MkDocsException, FileExistsError) as e:
        print(f"verified-book pages: {e}", file=sys.stderr)
        return 1
    for problem in plugin.problems:
        print(f"verified-book pages: {problem}", file=sys.stderr)
    shown = ", ".join(str(f.relative_to(book.root)) for f in files)
    print(f"verified-book: wrote {shown}, from {len(plugin.results)} results file(s)")
    return 1 if plugin.problems else 0


class Job(NamedTuple):
    """One job of the command: how it is called, what it does, and the function that runs it in a book."""

    call: str
    what: str
    run: Callable[[BookConfig, list[str]], int] | None  # None: `init`, which makes the book it runs in


#: every job of the command, in the order `--help` lists them
JOBS: dict[str, Job] = {
    "verify": Job(
        "verify [PYTEST ARGS]",
        "the book's checks (claims, figures, snippets, probes) on this machine, then the site with this "
        "machine's records beside the committed ones; ends with a one-line verdict",
        verify,
    ),
    "test": Job(
        "test [PYTEST ARGS]",
        "the whole test suite, the engine's own tests included",
        test,
    ),
    "site": Job(
        "site [MKDOCS ARGS]",
        "the site, `mkdocs build --strict`",
        site,
    ),
    "serve": Job(
        "serve [--port N]",
        "a live preview: one warm process computes the claims once, then a saved page is judged again (no claim "
        "runs), a saved claim module or data file recomputes exactly the claims it changed; one line a change",
        serve,
    ),
    "pages": Job(
        "pages",
        "the Machines, Plots and legend pages and the marks' stylesheet and script, written into the pages folder "
        "for a generator that runs no MkDocs plugin (Zensical); run again whenever the results change",
        pages,
    ),
    "contribute": Job(
        "contribute [--check-only] [--keep-newer]",
        "this machine's records (the local results folder) checked and merged into the committed results/, for a "
        "pull request; --check-only checks them and merges nothing, --keep-newer never replaces a record with an "
        "older one",
        contribute,
    ),
    "merge-results": Job(
        "merge-results FILE...",
        "results files from other machines checked and merged",
        merge_results,
    ),
    "machine": Job(
        "machine [--adopt FILE]",
        "this machine's identity (its results file's name); --adopt takes a committed machine's back, where this "
        "is that machine",
        machine,
    ),
    "plan": Job(
        "plan MARKER",
        "what a run on the book's machine MARKER (rtx5080, m4_max, ...) would check, on which backend, by page; "
        "runs nothing, on any machine",
        plan,
    ),
    "fault-table": Job(
        "fault-table [ARGS]",
        "every fault scenario run now, docs/faults.md written (needs a checkout: the scenarios live in the test "
        "harness)",
        fault_table,
    ),
    "init": Job(
        "init [FOLDER]",
        "a new book in FOLDER (this folder by default), which must be empty: book.toml, pytest's and MkDocs' "
        "configuration, one page, its claims and data; `pytest` then verifies it and `mkdocs build --strict` "
        "builds it",
        None,
    ),
}

#: the jobs whose arguments are the engine's own, so `--help` is answered here; the others hand it to what they
#: run (pytest, MkDocs, argparse), which names them as `verified-book JOB`
OWN_HELP = ("contribute", "machine", "plan", "pages", "init")


def overall_help() -> str:
    """`verified-book --help`: every job, its call and what it does."""
    import textwrap

    lines = ["usage: verified-book JOB [ARGS]", "", "jobs:"]
    for call, what, _ in JOBS.values():
        lines.append(f"  verified-book {call}")
        lines += textwrap.wrap(what, width=100, initial_indent="      ", subsequent_indent="      ")
    lines += ["", (__doc__ or "").split("\n\n", 1)[1].strip()]
    return "\n".join(lines)


def job_help(job: str) -> str:
    """`verified-book JOB --help` for a job in `OWN_HELP`."""
    import textwrap

    call, what, _ = JOBS[job]
    return f"usage: verified-book {call}\n\n" + textwrap.fill(what[0].upper() + what[1:] + ".", width=100)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(overall_help())
        return 0
    job, rest = argv[0], argv[1:]
    if job in OWN_HELP and {"-h", "--help"} & set(rest):
        print(job_help(job))
        return 0
    if job not in JOBS:
        print(f"verified-book: unknown job {job!r}; expected one of {', '.join(JOBS)}", file=sys.stderr)
        return 2
    runs = JOBS[job].run
    if runs is None:
        return init_book.init(rest)
    book = _book()
    os.chdir(book.root)
    try:
        return runs(book, rest)
    except KeyboardInterrupt:
        print("\nverified-book: interrupted", file=sys.stderr)
        return INTERRUPTED


#: the code the command ends with, set once its job returned, read by the last exit handler
_EXIT_CODE = [0]


def _end_now() -> None:
    """The last exit handler: flush what was said and end the process before the interpreter's teardown."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError):  # the reader closed the pipe (`| head`): nothing left to say
            pass
    os._exit(_EXIT_CODE[0])


def run() -> NoReturn:
    """The `verified-book` command: `main`, then an exit that skips the interpreter's teardown.

    By the time a job returns its records are written and closed. What an ordinary exit does
    next is unload the libraries the claims imported, and torch with transformers takes one to
    two seconds over it while doing nothing a finished command needs. So the command's own exit
    handler is registered first, and so runs last: every handler the job's libraries registered
    runs before it (temporary folders' removal, child processes joined), logging is flushed, the
    output is flushed, and then the process ends.
    """
    atexit.register(_end_now)
    try:
        code: int | str | None = main()
    except SystemExit as e:
        code = e.code
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    _EXIT_CODE[0] = code or 0
    sys.exit(_EXIT_CODE[0])


if __name__ == "__main__":
    run()
