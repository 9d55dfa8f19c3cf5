"""A page's Markdown → Markdown with a placeholder token per figure, and the HTML each token stands for.

A page's Markdown goes in with its bindings (from `verified_book.book.bindings`) and every
machine's results file; out come Markdown in which each binding is a placeholder token, and
the HTML each token stands for (`verified_book.site.render`). The site generator converts the
Markdown and `fill` puts the HTML back, so no `claim:` link ever reaches the generator. Where
a code block starts and ends is the book's lexer's answer (`verified_book.book.lexer`), the
same the bindings scanner reads.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Callable, Collection, Mapping, Sequence

from markupsafe import Markup, escape

from verified_book.authoring.registry import Claim
from verified_book.book import snippet_display
from verified_book.book.bindings import BINDING, Binding, Page, unknown_claim
from verified_book.book.lexer import CodeBlock, include_of, lex
from verified_book.engine.figure_status import FigureView, figure_view, short
from verified_book.errors import Problem
from verified_book.records.results import ResultsFile
from verified_book.site.render import PanelRows, markup, render_error, render_figure
from verified_book.vocabulary import Shown

_LEFTOVER = re.compile(r"(?:\[[^\[\]]*)?\]\(\s*claim:[^)]*\)?")


#: how a snippet's output was produced, as the caption says it (verified_book.engine.snippet_run)
RUN_HOW = {"script": "as a script", "in process": "inside the test process, its libraries already loaded"}


@dataclass
class Context:
    """What every page's rendering needs: the results, the claims, where the code lives."""

    results: Mapping[str, ResultsFile]
    claims: Callable[[str], Claim | None]
    repo_url: str | None = None
    near: Callable[[str], Sequence[str]] = lambda _: ()
    quiet: Collection[str] = ()  # fleet machines not reported within the site's window
    #: an included file's text by the path its include names, or None where there is none to read
    include: Callable[[str], str | None] = lambda _: None
    load_errors: Sequence[Problem] = ()  # what kept the book's topics from loading: why a claim may be unknown
    #: the hash of a snippet's source as the book has it now, by file name; None where it has no such snippet
    snippet_hash: Callable[[str], str | None] = lambda _: None
    own: Collection[str] = ()  # this clone's own runs, by the name the site shows: a panel keeps them on its page


@dataclass
class RenderedPage:
    """A page's Markdown with placeholder tokens, the HTML for each token, and what went wrong."""

    markdown: str
    file: str = ""
    fragments: dict[str, Markup] = field(default_factory=dict)
    blocks: dict[str, Markup] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    views: list[FigureView] = field(default_factory=list)
    missing: list[Binding] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)
    rows: PanelRows | None = None  # where the panels put the machines left to the page's data file


class _Tokens:
    """Placeholder tokens: letters and digits only, so Markdown leaves them as they are."""

    def __init__(self, seed: str) -> None:
        self.salt = hashlib.sha1(seed.encode("utf-8")).hexdigest()[:10].upper()
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"VBCLAIM{self.salt}N{self.count}Z"


def included_paths(markdown: str) -> set[str]:
    """The scripts a page includes (`--8<-- "path.py"`), each as its include line names it."""
    return {str(PurePosixPath(i.path)) for i in lex(markdown.split("\n")).includes if i.path.endswith(".py")}


def snippet_of(info: str, last_include: str | None) -> str | None:
    """The snippet an output block shows: `output name.py` in its info string, else the last include."""
    words = info.strip().split()
    for word in words[1:]:
        if word.endswith(".py"):
            return PurePosixPath(word.strip("\"'")).name
    return PurePosixPath(last_include).name if last_include else None


def render_markdown(
    markdown: str, page: Page, context: Context, line_offset: int = 0, rows: PanelRows | None = None
) -> RenderedPage:
    """Replace every binding of `page` in `markdown` by a token, and output blocks by tabs.

    `line_offset` is how many lines of the file precede `markdown` (front matter the
    site generator has already taken off), so bindings' file lines find their place.
    Given `rows`, each panel leaves the machines that do not decide its figure there (`render.render_panel`).
    """
    tokens = _Tokens(page.file + "\0" + markdown)
    out = RenderedPage(markdown, page.file, rows=rows)
    lines = markdown.split("\n")
    by_line: dict[int, list[Binding]] = {}
    for b in [*page.bindings, *page.malformed]:
        by_line.setdefault(b.line - line_offset - 1, []).append(b)
    result: list[str] = []
    last_include: str | None = None
    for region in lex(lines, front_matter=False).regions:
        if isinstance(region, CodeBlock) and region.is_output:
            snippet = snippet_of(region.fence.info, last_include)
            result.extend(_output_block(lines, region, by_line, context, tokens, out, snippet))
            continue
        for number, raw in region.numbered():
            include = include_of(raw)
            if include is not None and include[1].endswith(".py"):
                last_include = include[1]
            else:
                include = None
            if isinstance(region, CodeBlock):
                in_body = number != region.first
                result.extend(_shown_include(raw, include[1], context) if include and in_body else [raw])
            else:
                result.append(_inline(raw, by_line.get(number - 1, []), context, tokens, out))
    out.markdown = "\n".join(result)
    return out


def _shown_include(raw: str, path: str, context: Context) -> list[str]:
    """A snippet included in a code block, as the reader sees it: a percent-format script without its
    cell markers (verified_book.book.snippet_display); any other file is left to the include itself."""
    source = context.include(path)
    if source is None or not snippet_display.is_percent_script(source):
        return [raw]
    indent = raw[: len(raw) - len(raw.lstrip())]
    return [f"{indent}{line}" if line else "" for line in snippet_display.reading_form(source).rstrip("\n").split("\n")]


def _span(raw: str, b: Binding) -> tuple[int, int] | None:
    """Where binding `b` sits on its line, checked against the text actually given."""
    start = b.column - 1
    match = BINDING.match(raw, start)
    if match and match.group("id") == b.claim_id and match.group("text") == b.text:
        return match.span()
    leftover = _LEFTOVER.search(raw, max(0, start - 1))
    if b.error and leftover:
        open_at = raw.rfind("[", 0, leftover.start() + 1)
        return (open_at if open_at >= 0 and leftover.group(0).startswith("]") else leftover.start(), leftover.end())
    return None


def _figure_html(b: Binding, context: Context, out: RenderedPage, uid: str, in_code: bool) -> Markup:
    if b.error:
        out.problems.append(Problem(b.where, b.error))
        return render_error(b.text if b.claim_id else "broken figure", b.error, b.claim_id, in_code)
    claim = context.claims(b.claim_id)
    if claim is None:
        message = unknown_claim(b, list(context.near(b.claim_id)), context.load_errors)
        out.problems.append(Problem(b.where, message))
        return render_error(b.text, message, b.claim_id, in_code)
    view = figure_view(b, claim, context.results)
    out.views.append(view)
    if view.status == Shown.UNVERIFIED:
        out.missing.append(b)
    return render_figure(view, context.results, context.repo_url, uid, in_code, context.quiet, out.rows, context.own)


def _uid(token: str) -> str:
    return "vbp-" + token[len("VBCLAIM") :].lower()


def _inline(raw: str, bindings: list[Binding], context: Context, tokens: _Tokens, out: RenderedPage) -> str:
    for b in sorted(bindings, key=lambda x: x.column, reverse=True):
        span = _span(raw, b)
        if span is None:
            out.problems.append(
                Problem(
                    b.where,
                    f"figure {b.text} ({b.claim_id}) is not where the book has it; the page changed during the build",
                )
            )
            continue
        token = tokens.next()
        out.fragments[token] = _figure_html(b, context, out, _uid(token), False)
        out.titles[token] = b.text
        raw = raw[: span[0]] + token + raw[span[1] :]
    return raw


def _output_block(
    lines: list[str],
    block: CodeBlock,
    by_line: dict[int, list[Binding]],
    context: Context,
    tokens: _Tokens,
    out: RenderedPage,
    snippet: str | None,
) -> list[str]:
    """An output block as content tabs: the book's text with its figures, then each machine's output."""
    indent = block.fence.indent
    body: list[Markup] = []
    plain: list[str] = []
    for number, _ in block.numbered_body():
        i = number - 1
        raw = lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip()
        shift = len(lines[i]) - len(raw)
        pieces: list[str] = []  # the book's text, which Markup().join escapes, and its figures' Markup
        plain_pieces: list[str] = []
        cursor = 0
        spans = []
        for b in by_line.get(i, []):
            span = _span(lines[i], b)
            if span is None:
                out.problems.append(Problem(b.where, f"figure {b.text} ({b.claim_id}) is not where the book has it"))
                continue
            spans.append((span[0] - shift, span[1] - shift, b))
        for s, e, b in sorted(spans, key=lambda x: x[0]):
            pieces.append(raw[cursor:s])
            plain_pieces.append(raw[cursor:s])
            pieces.append(_figure_html(b, context, out, _uid(tokens.next()), True))
            plain_pieces.append(b.text)
            cursor = e
        pieces.append(raw[cursor:])
        plain_pieces.append(raw[cursor:])
        body.append(Markup().join(pieces))
        plain.append("".join(plain_pieces))
    book_token = tokens.next()
    out.blocks[book_token] = _code_block(Markup("\n").join(body), "\n".join(plain), "vb-output vb-output--book")
    machines = []
    if snippet:
        for slug in sorted(context.results):
            entry = context.results[slug].outputs.get(snippet)
            if entry is not None:
                machines.append((slug, entry))
    if not machines:
        return [f"{indent}{book_token}"]
    result = [f'{indent}===! "The book"', "", f"{indent}    {book_token}", ""]
    source_now = context.snippet_hash(snippet) if snippet else None  # read once, for every machine's run
    for slug, entry in machines:
        token = tokens.next()
        text = short(entry.text.rstrip("\n"), 20000)
        date = entry.date or ""
        seconds = entry.seconds
        took = f", ran in {seconds:.2f} s" if seconds is not None else ""
        if took and entry.how in RUN_HOW:
            took += f" {RUN_HOW[entry.how]}"
        on = f" on {date[:10]}" if date else ""
        caption = markup(
            '<p class="vb-output__caption">What <code>{}</code> printed on <b>{}</b>{}{}.{}</p>',
            snippet,
            slug,
            on,
            took,
            _earlier_version(snippet, entry.sha256, source_now),
        )
        run = _code_block(escape(text), text, "vb-output vb-output--machine")
        # a machine's run repeats the book's text: the site's search indexes the book's block alone
        out.blocks[token] = markup('<div class="vb-output__run" data-search-exclude>{}{}</div>', caption, run)
        label = str(escape(slug)).replace("\\", "&#92;")  # Markdown: a tab's title
        result += [f'{indent}=== "{label}"', "", f"{indent}    {token}", ""]
    return result


def _earlier_version(snippet: str | None, printed_by: str | None, now: str | None) -> Markup:
    """What a machine's output says where an earlier version of the snippet printed it (`printed_by` is not
    the hash of its source `now`): the book shows the snippet as it is now, and the run is not of that code.
    Nothing where the record keeps no hash (a file from before schema 5): which version ran is not known."""
    if printed_by is None or now is None or printed_by == now:
        return Markup("")
    return Markup(
        ' <span class="vb-output__earlier">Printed by an earlier version of <code>{}</code>: the snippet has '
        "changed since this run.</span>"
    ).format(snippet)


def _code_block(inner_html: Markup, plain: str, classes: str) -> Markup:
    return markup(
        '<div class="highlight {}" data-copy="{}"><pre><code>{}</code></pre></div>', classes, plain, inner_html
    )


_CLAIM_HREF = re.compile(r'<a\b[^>]*\bhref="\s*claim:(?P<id>[^"]*)"[^>]*>(?P<text>.*?)</a>', re.DOTALL)
_TOKEN = re.compile(r"(?:<p>)?(?P<token>VBCLAIM[0-9A-F]{10}N\d+Z)(?:</p>)?")
_LOWER_TOKEN = re.compile(r"vbclaim[0-9a-f]{10}n\d+z")


def fill(html_text: str, rendered: RenderedPage, where: str) -> tuple[str, list[Problem]]:
    """Put each token's HTML in place; report tokens the conversion lost and `claim:` links that slipped through."""
    problems: list[Problem] = []
    found: set[str] = set()

    def put(m: re.Match[str]) -> str:
        token = m.group("token")
        found.add(token)
        if token in rendered.blocks:  # a block replaces its whole placeholder paragraph
            return rendered.blocks[token]
        inner = rendered.fragments.get(token, token)
        return m.group(0).replace(token, inner)

    html_text = _TOKEN.sub(put, html_text)
    for _token in rendered.blocks.keys() - found:
        problems.append(Problem(where, "an output block was lost in conversion (is it inside raw HTML?)"))
    for token in rendered.fragments.keys() - found:
        problems.append(
            Problem(
                where,
                f"figure {rendered.titles.get(token, '?')} was lost in conversion "
                "(a binding inside raw HTML or a link?)",
            )
        )
    lower = {token.lower(): _slug(text) for token, text in rendered.titles.items()}
    html_text = _LOWER_TOKEN.sub(
        lambda m: lower.get(m.group(0), m.group(0)), html_text
    )  # a figure in a heading's anchor

    def slipped(m: re.Match[str]) -> str:
        message = f"a claim: link was not read as a binding: claim:{html.unescape(m.group('id'))}"
        problems.append(Problem(where, message))
        return render_error(re.sub(r"<[^>]+>", "", m.group("text")), message, html.unescape(m.group("id")))

    html_text = _CLAIM_HREF.sub(slipped, html_text)
    return html_text, problems


_TAB_LABELS = re.compile(r'(<div class="tabbed-labels[^"]*">)(.*?)(</div>)', re.DOTALL)


def separate_tab_labels(html_text: str) -> str:
    """Content tabs' labels with a space between them, so that text taken from the page (the search
    index, a copy) reads "The book cpu-x86_64-2c", not "The bookcpu-x86_64-2c"; as flex items they
    are laid out the same."""
    return _TAB_LABELS.sub(
        lambda m: m.group(1) + m.group(2).replace("</label><label", "</label> <label") + m.group(3), html_text
    )


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-")


def plain_anchor(anchor: str, rendered: RenderedPage) -> str:
    """A heading's anchor with figure tokens back as the printed text, as the table of contents needs it."""
    for token, text in rendered.titles.items():
        anchor = anchor.replace(token.lower(), _slug(text))
    return anchor


def plain_title(title: str, rendered: RenderedPage) -> str:
    """A heading or TOC title with figure tokens back as their printed text."""
    for token, text in rendered.titles.items():
        title = title.replace(token, escape(text))
    return title
