"""Plots of what the machines measured, drawn at build time from their results files.

Nothing is computed here but the drawing: every number plotted is a value some
machine recorded. A plot whose records are absent is left out with a note saying
which claims it waits for. SVGs are drawn with text and axes in a sentinel colour
that becomes `currentColor`, so inline in the page they take the palette's text
colour and read on white and on dark slate alike.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from markupsafe import Markup

from verified_book import ID_PATTERN, GeneratedPage, ResultsFile, number, remembered

TRACKS = ("dgx_spark", "ryzen_ai_max", "m4_max", "rtx5090")
FORMATS = ("bf16", "q4_k_m")
FORMAT_LABELS = {"bf16": "BF16", "q4_k_m": "Q4_K_M"}
MATMUL_DTYPES = ("fp32", "fp16", "bf16")  # drawing order: BF16 on top where peaks coincide
SWEEP_BATCHES = (1, 8, 64, 256)
INTENSITY = re.compile(r"^flops\.(?:intensity\.(?P<name>[a-z0-9_.]+)|job\.(?P<job>[a-z0-9_]+)\.intensity)$")

INK = "#0a0b0c"  # text, ticks, spines: becomes currentColor
GRID = "#0a0b0d"  # grid lines: currentColor at low opacity
SERIES = {"bf16": "#3b82f6", "fp16": "#10b981", "fp32": "#f59e0b", "q4_k_m": "#f97316"}
CYCLE = ("#3b82f6", "#f97316", "#10b981", "#a855f7", "#ef4444", "#14b8a6")
LINESTYLES = ("-", "--", ":", "-.")
#: the size of every text a chart draws, in its own units; the page never shows a chart narrower
#: than it is drawn (claims.css), so each text reads at this many pixels or more
TEXT = 11
#: the roofline's headroom above its highest roof, as a fraction of its log y range: a job's number set above
#: its diamond on that roof (about 18 points of a 220-point axis) stays clear of the title
LABEL_HEADROOM = 0.15


@dataclass(frozen=True)
class Plot:
    """One chart: its title, its SVG (None when its records are absent) and a caption or note."""

    key: str
    title: str
    svg: str | None
    note: str
    #: where the records contradict what the page states, one sentence each, shown under the chart
    warnings: tuple[str, ...] = ()


def values(results: ResultsFile, claim_id: str) -> dict[str, float]:
    """The numeric value each backend recorded for a claim on one machine."""
    out = {}
    for backend, record in sorted(results.records.get(claim_id, {}).items()):
        if record.status != "skipped":
            value = number(record.value)
            if value is not None and value > 0:
                out[str(backend)] = value
    return out


def first_value(results: Mapping[str, ResultsFile], claim_id: str) -> float | None:
    """An exact claim's value from whichever machine recorded it (all agree by construction)."""
    for slug in sorted(results):
        found = values(results[slug], claim_id)
        if found:
            return next(iter(found.values()))
    return None


def intensities(results: Mapping[str, ResultsFile]) -> dict[str, float]:
    """The book's jobs, by name, at the arithmetic intensity (FLOP per byte) their claims recorded.

    Claims `flops.intensity.<job>` or `flops.job.<job>.intensity`.
    """
    out: dict[str, float] = {}
    for slug in sorted(results):
        for claim_id in sorted(results[slug].records):
            match = INTENSITY.match(claim_id) if isinstance(claim_id, str) and ID_PATTERN.match(claim_id) else None
            if match:
                value = first_value({slug: results[slug]}, claim_id)
                if value is not None:
                    out.setdefault(match.group("name") or match.group("job"), value)
    return out


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(key: str) -> dict[str, Any]:
    from cycler import cycler

    return {
        "svg.fonttype": "none",
        "svg.hashsalt": key,
        "font.size": TEXT,
        "text.color": INK,
        "axes.labelcolor": INK,
        "axes.edgecolor": INK,
        "xtick.color": INK,
        "ytick.color": INK,
        "axes.facecolor": "none",
        "figure.facecolor": "none",
        "savefig.facecolor": "none",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titleweight": "bold",
        "axes.grid": True,
        "grid.color": GRID,
        "grid.alpha": 0.18,
        "grid.linewidth": 0.6,
        "legend.frameon": False,
        "axes.prop_cycle": cycler(color=CYCLE),
    }


def to_svg(fig: Any, title: str) -> str:
    """A figure as inline SVG: no XML prologue, ids kept unique, ink in the page's text colour."""
    buffer = io.StringIO()
    fig.savefig(
        buffer,
        format="svg",
        metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        bbox_inches="tight",
        transparent=True,
    )
    _pyplot().close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.DOTALL)
    svg = re.sub(r'<g id="[^"]*"', "<g", svg)
    svg = svg.replace(INK, "currentColor").replace(GRID, "currentColor")
    svg = re.sub(r"font-family: [^;\"]*", "font-family: inherit", svg)
    drawn = re.search(r'viewBox="0 0 ([\d.]+) ', svg)
    floor = f' style="min-width: {math.ceil(float(drawn.group(1)))}px"' if drawn else ""  # one unit a pixel at least
    svg = re.sub(
        r'<svg ([^>]*?)width="[^"]*" height="[^"]*"',
        lambda m: f'<svg {m.group(1)}class="vb-plot__svg" role="img" aria-label="{_attr(title)}"{floor}',
        svg,
        count=1,
    )
    return svg.strip()


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _plain_ticks(ax: Any) -> None:
    """Tick labels as plain numbers (0.25, 1, 4, 1,000), not powers: a reader compares them with the text."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2g}"


def roofline(results: ResultsFile, jobs: Mapping[str, float]) -> Plot:
    """Attainable GFLOP/s against FLOP per byte, from one machine's measured bandwidth and peaks."""
    key, title = f"roofline-{results.slug}", f"Roofline measured on {results.slug}"
    bandwidth = values(results, "probe.bandwidth.read") or values(results, "probe.bandwidth.copy")
    peaks = {dtype: values(results, f"probe.matmul.{dtype}") for dtype in MATMUL_DTYPES}
    backends = [b for b in bandwidth if any(b in p for p in peaks.values())]
    if not backends:
        return Plot(
            key,
            title,
            None,
            f"{results.slug} has not recorded both a bandwidth (probe.bandwidth.read or "
            "probe.bandwidth.copy) and a matmul peak (probe.matmul.*) on one backend yet.",
        )
    plt = _pyplot()
    with plt.rc_context(_style(key)):
        fig, ax = plt.subplots(figsize=(7.2, 4.4))
        ridges = [peaks[d][b] / bandwidth[b] for b in backends for d in MATMUL_DTYPES if b in peaks[d]]
        low = min([0.25, *[v / 2 for v in jobs.values()]])
        high = max([max(ridges) * 8, 64, *[v * 2 for v in jobs.values()]])
        xs = [low * (high / low) ** (i / 200) for i in range(201)]
        top_roof: tuple[str, str] | None = None
        for i, backend in enumerate(backends):
            for dtype in MATMUL_DTYPES:
                if backend not in peaks[dtype]:
                    continue
                peak, bw = peaks[dtype][backend], bandwidth[backend]
                ridge_recorded = values(results, f"probe.ridge.{dtype}").get(backend)
                ridge = ridge_recorded or peak / bw
                ax.plot(
                    xs,
                    [min(peak, bw * x) for x in xs],
                    color=SERIES[dtype],
                    linestyle=LINESTYLES[i % len(LINESTYLES)],
                    linewidth=1.8,
                    label=f"{backend} {dtype.upper()}: {_fmt(peak)} GFLOP/s, {_fmt(bw)} GB/s",
                )
                if low <= ridge <= high:
                    ax.plot([ridge], [min(peak, bw * ridge)], marker="o", markersize=4, color=SERIES[dtype])
                if (
                    top_roof is None
                    or (dtype == "bf16" and top_roof[1] != "bf16")
                    or (dtype == top_roof[1] and peak > peaks[dtype][top_roof[0]])
                ):
                    top_roof = (backend, dtype)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlim(low, high)
        if top_roof is not None:
            backend, dtype = top_roof
            peak, bw = peaks[dtype][backend], bandwidth[backend]
            # room above the highest roof for a job's label set above its diamond, below the title
            bottom, top = ax.get_ylim()
            ax.set_ylim(bottom, top * (top / bottom) ** LABEL_HEADROOM)
            # each diamond carries its job's number (the caption names them): a name beside each would meet the
            # next one's wherever a machine's roof puts two jobs close, and a digit fits between any two
            for number, (name, intensity) in enumerate(sorted(jobs.items(), key=lambda kv: kv[1]), 1):
                attainable = min(peak, bw * intensity)
                ax.axvline(intensity, color=GRID, alpha=0.35, linewidth=0.8, linestyle=":")
                ax.plot([intensity], [attainable], marker="D", markersize=5, color=INK)
                ax.annotate(
                    str(number),
                    (intensity, attainable),
                    textcoords="offset points",
                    fontsize=TEXT,
                    xytext=(4, 5),
                    ha="left",
                    gid=f"job-{name}",
                )
        _plain_ticks(ax)
        ax.set_xlabel("arithmetic intensity (FLOP per byte)")
        ax.set_ylabel("attainable GFLOP/s")
        dates = sorted(
            {run_date(results, f"probe.matmul.{d}", b) for b in backends for d in MATMUL_DTYPES if b in peaks[d]}
        )
        title = f"{title}, run {', '.join(dates)}"
        ax.set_title(title, loc="left", fontsize=TEXT + 1)
        ax.legend(fontsize=TEXT, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)
        svg = to_svg(fig, title)
    jobs_note = (
        "Diamonds: the book's jobs at the intensity their claims recorded, numbered: "
        + ", ".join(
            f"{number} {k} ({_fmt(v)} FLOP per byte)"
            for number, (k, v) in enumerate(sorted(jobs.items(), key=lambda kv: kv[1]), 1)
        )
        + "."
        if jobs
        else "The book's jobs are not placed: no results file records their intensity (flops.job.*.intensity) yet."
    )
    return Plot(
        key,
        title,
        svg,
        "Lines: min(peak, bandwidth × intensity) for each backend and precision measured; "
        f"dots mark the ridge points. {jobs_note}",
    )


def decode_ceilings(results: Mapping[str, ResultsFile]) -> Plot:
    """Batch-1 decode ceilings: the four tracks from vendor bandwidth, and what machines measured."""
    key, title = "decode-ceilings", "Decode ceiling, tokens/s at batch 1"
    rows: list[tuple[str, dict[str, float], bool]] = []
    for track in TRACKS:
        found = {fmt: first_value(results, f"decode.ceiling.{track}.{fmt}") for fmt in FORMATS}
        if any(v is not None for v in found.values()):
            rows.append((track, {k: v for k, v in found.items() if v is not None}, False))
    for slug in sorted(results):
        per_fmt = {fmt: values(results[slug], f"probe.decode_ceiling.qwen3_8b.{fmt}") for fmt in FORMATS}
        for backend in sorted({b for v in per_fmt.values() for b in v}):
            day = run_date(results[slug], "probe.decode_ceiling.qwen3_8b.bf16", backend)
            rows.append(
                (
                    f"{slug} · {backend} · {day}",
                    {f: per_fmt[f][backend] for f in FORMATS if backend in per_fmt[f]},
                    True,
                )
            )
    if not rows:
        return Plot(
            key,
            title,
            None,
            "No results file records decode.ceiling.{track}.{fmt} or probe.decode_ceiling.qwen3_8b.{fmt} yet.",
        )
    plt = _pyplot()
    with plt.rc_context(_style(key)):
        fig, ax = plt.subplots(figsize=(7.2, 1.0 + 0.62 * len(rows)))
        height = 0.38
        for r, (_label, found, measured) in enumerate(rows):
            for f, fmt in enumerate(FORMATS):
                if fmt not in found:
                    continue
                y = r + (f - 0.5) * height
                ax.barh(
                    y,
                    found[fmt],
                    height=height * 0.92,
                    color=SERIES[fmt],
                    alpha=0.55 if measured else 0.95,
                    linewidth=0,
                    label=FORMAT_LABELS[fmt] if not any(fmt in x[1] for x in rows[:r]) else None,
                )
                ax.text(found[fmt], y, f" {_fmt(found[fmt])}", va="center", fontsize=TEXT)
        ax.set_yticks(range(len(rows)), [label for label, _, _ in rows])
        split = next((r for r, row in enumerate(rows) if row[2]), None)
        if split:
            ax.axhline(split - 0.5, color=GRID, alpha=0.5, linewidth=0.8, linestyle="--")
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("tokens per second (Qwen3-8B weights, one token at a time)")
        ax.set_title(title, loc="left", fontsize=TEXT + 1, pad=TEXT * 2.2)
        ax.margins(x=0.12)
        ax.legend(fontsize=TEXT, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=2)
        svg = to_svg(fig, title)
    vendor = "the ceiling from each track's vendor bandwidth (claims decode.ceiling.*)"
    measured = "the ceiling each machine measured (probe.decode_ceiling.qwen3_8b.*), per backend"
    if split:
        note = f"Above the dashed line, full colour: {vendor}. Below it, paler: {measured}."
    else:
        note = (
            f"Paler bars: {measured}; no results file records decode.ceiling.* yet."
            if rows[0][2]
            else f"Bars: {vendor}. No machine has measured its own ceiling yet (probe.decode_ceiling.qwen3_8b.*)."
        )
    return Plot(key, title, svg, note)


def run_date(results: ResultsFile, claim_id: str, backend: str) -> str:
    """The day a machine recorded a claim on a backend (its record's date), else its latest run's."""
    date = results.date_of(claim_id, backend)
    return date[:10] if isinstance(date, str) and re.match(r"^\d{4}-\d{2}-\d{2}", date) else "undated"


def skip_reason(results: ResultsFile, claim_id: str, backend: str) -> str | None:
    """Why a machine skipped a claim on a backend, as its record says; None where it did not skip it."""
    record = results.records.get(claim_id, {}).get(backend)
    if record is None or record.status != "skipped":
        return None
    return record.message.splitlines()[0] if record.message else "skipped"


def sweep_findings(
    gflops: Mapping[int, float], traffic: Mapping[int, float], missing: Mapping[int, str | None]
) -> list[str]:
    """Where one backend's sweep contradicts what the page states (GFLOP/s rise and weight GB/s fall from
    batch 1 to 256), or leaves batches out: each as a sentence to print on the chart."""
    found = []
    for series, what, rising in ((gflops, "GFLOP/s", True), (traffic, "weight GB/s", False)):
        batches = [b for b in SWEEP_BATCHES if b in series]
        for a, b in zip(batches, batches[1:]):
            if (series[b] < series[a]) if rising else (series[b] > series[a]):
                found.append(
                    f"{what} {'fall' if rising else 'rise'} from batch {a} to {b} "
                    f"({_fmt(series[a])} → {_fmt(series[b])}), against the "
                    f"{'rise' if rising else 'fall'} the page states"
                )
    absent = [b for b in SWEEP_BATCHES if b not in gflops]
    if absent:
        batches = (
            f"batch {absent[0]}"
            if len(absent) == 1
            else f"batches {', '.join(str(b) for b in absent[:-1])} and {absent[-1]}"
        )
        reason = next((r for r in (missing.get(b) for b in absent) if r), None)
        why = (
            "skipped by the sweep's time budget"
            if reason and "budget" in reason
            else (f"batch {absent[0]}'s record says “{plain_reason(reason, absent[0])}”" if reason else "not recorded")
        )
        found.append(f"{batches} not measured, {why}")
    return found


def plain_reason(reason: str, batch: int) -> str:
    """A skip reason as a clause of a sentence: without the words "batch N is" the sentence
    already says, or the asides in parentheses."""
    reason = re.sub(rf"^batch {batch} is ", "", reason.strip())
    return re.sub(r"\s*\([^()]*\)", "", reason).rstrip(" .")


def sweep(results: ResultsFile) -> Plot:
    """The intensity sweep on one machine: throughput and weight traffic as the batch grows.

    The page states that on every machine the GFLOP/s rise from batch 1 to 256 while the weight
    GB/s fall; where a backend's records say otherwise, or leave batches out, the chart says so
    under its axes, in the same words as its caption.
    """
    key = f"sweep-{results.slug}"
    gflops = {b: values(results, f"probe.sweep.{b}.gflops") for b in SWEEP_BATCHES}
    traffic = {b: values(results, f"probe.sweep.{b}.weight_gbs") for b in SWEEP_BATCHES}
    backends = sorted({k for v in [*gflops.values(), *traffic.values()] for k in v})
    title = f"Batch sweep measured on {results.slug}"
    if not backends:
        return Plot(
            key,
            title,
            None,
            f"{results.slug} has not recorded probe.sweep.{{batch}}.gflops or probe.sweep.{{batch}}.weight_gbs yet.",
        )
    dates = sorted({run_date(results, "probe.sweep.1.gflops", b) for b in backends})
    title = f"Batch sweep measured on {results.slug}, run {', '.join(dates)}"
    by_finding: dict[str, list[str]] = {}  # a finding said once, with every backend it holds for
    for backend in backends:
        per_g = {b: gflops[b][backend] for b in SWEEP_BATCHES if backend in gflops[b]}
        per_t = {b: traffic[b][backend] for b in SWEEP_BATCHES if backend in traffic[b]}
        missing = {
            b: (skip_reason(results, f"probe.sweep.{b}.gflops", backend) or "").removeprefix(f"{backend}: ") or None
            for b in SWEEP_BATCHES
        }
        for finding in sweep_findings(per_g, per_t, missing):
            by_finding.setdefault(finding, []).append(backend)
    warnings = tuple(f"{', '.join(names)}: {finding}." for finding, names in by_finding.items())
    plt = _pyplot()
    with plt.rc_context(_style(key)):
        fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.6))
        for i, backend in enumerate(backends):
            label = backend
            for ax, series in ((left, gflops), (right, traffic)):
                points = [(b, series[b][backend]) for b in SWEEP_BATCHES if backend in series[b]]
                if points:
                    ax.plot(
                        [p[0] for p in points],
                        [p[1] for p in points],
                        marker="o",
                        markersize=4,
                        color=CYCLE[i % len(CYCLE)],
                        label=label if ax is left else None,
                        linewidth=1.6,
                        linestyle=LINESTYLES[i % len(LINESTYLES)],
                    )
        for ax, label in ((left, "GFLOP/s"), (right, "weight GB/s")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(SWEEP_BATCHES, [str(b) for b in SWEEP_BATCHES])
            ax.set_xlim(0.7, 360)
            ax.set_xlabel("batch (tokens per weight read)")
            ax.set_ylabel(label)
        fig.suptitle(title, x=0.01, ha="left", fontsize=TEXT + 1, fontweight="bold")
        fig.legend(
            fontsize=TEXT, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=min(3, len(backends)), frameon=False
        )
        fig.tight_layout()
        svg = to_svg(fig, title)
    note = (
        "Left: throughput of the layer's matmul as the batch grows; right: the weight bytes it streams per "
        f"second. Growing the batch raises the FLOP per byte read. Each line is one backend of {results.slug}."
    )
    if warnings:
        note += " Where the records do not show what the page states, it is said below."
    return Plot(key, title, svg, note, warnings)


@dataclass(frozen=True)
class Section:
    title: str
    plots: tuple[Plot, ...]


def all_plots(results: Mapping[str, ResultsFile]) -> list[Section]:
    """Every plot of the book, by section, in page order; each drawn once for the records it shows
    (`remembered`: a build keeps it until its records or this code change)."""
    jobs = intensities(results)
    slugs = sorted(results)
    return [
        Section("Roofline per machine", tuple(remembered(roofline, results[s], jobs) for s in slugs)),
        Section("Decode ceilings", (remembered(decode_ceilings, results),)),
        Section("Batch sweep per machine", tuple(remembered(sweep, results[s]) for s in slugs)),
    ]


def plot_html(plot: Plot) -> Markup:
    """A plot as a figure with its caption, or its note where it is left out."""
    if plot.svg is None:
        return Markup('<p class="vb-plot__missing" data-plot="{}">{}</p>').format(plot.key, plot.note)
    warnings = Markup().join(
        Markup('<li><span class="vb-plot__warning-mark" aria-hidden="true">⚠</span> {}</li>').format(w)
        for w in plot.warnings
    )
    listed = Markup('<ul class="vb-plot__warnings">{}</ul>').format(warnings) if warnings else Markup()
    return Markup(
        '<figure class="vb-plot" data-plot="{key}"><div class="vb-scroll vb-plot__scroll">{svg}</div>'
        "<figcaption>{note}{listed}</figcaption></figure>"
    ).format(key=plot.key, svg=Markup(plot.svg), note=plot.note, listed=listed)


def render_plots_page(results: Mapping[str, ResultsFile]) -> GeneratedPage:
    """The plots page: each section's charts, or the note saying what each one waits for."""
    page = GeneratedPage("")
    lines = [
        "# Plots",
        "",
        "Every chart below is drawn from the results files machines committed; nothing is "
        "computed to draw it. A chart whose records are missing says which claims it waits for.",
        "",
    ]
    for n, section in enumerate(all_plots(results)):
        lines += [f"## {section.title}", ""]
        if not section.plots:
            lines += ["No machine has committed results yet.", ""]
        for m, plot in enumerate(section.plots):
            token = f"VBPLOTS{n}X{m}Z"
            page.blocks[token] = plot_html(plot)
            lines += [token, ""]
    page.markdown = "\n".join(lines)
    return page
