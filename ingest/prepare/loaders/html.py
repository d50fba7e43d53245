"""HTML with a real parser (lxml through BeautifulSoup), styles through tinycss2.

Only the page's main content is read, without site furniture (``html_main``); a page with no
detectable main content is read whole (``LoadedDoc.whole_body``). Scripts, styles and other
non-text elements are dropped. Hidden elements and text (``ingest.prepare.loaders.hidden``: the
computed style of each element, from inline styles, ``<style>`` rules by selector,
presentational attributes and inheritance) are dropped too, and the section they were in is
flagged ``hidden_html``. Sections follow h1-h6. ``<pre>`` blocks become fenced code blocks
with their lines as they are; table rows become one line each, cells separated by `` | ``.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, Tag, XMLParsedAsHTMLWarning
from bs4.element import Comment, Doctype, NavigableString, ProcessingInstruction

from docquery.chunking.code import fenced
from ingest.model import LoadedDoc, Section
from ingest.prepare.loaders import html_main
from ingest.prepare.loaders.css import Context
from ingest.prepare.loaders.hidden import FLAG_MIN_CHARS, NON_TEXT_TAGS, Styles
from ingest.prepare.loaders.limits import MAX_HEADING_CHARS, Limits, heading_path
from ingest.prepare.loaders.textcodec import decode_text

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCK = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "dd", "details", "dialog", "div", "dl", "dt"),
        *("fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p"),
        *("pre", "section", "summary", "table", "tbody", "tfoot", "thead", "tr", "ul"),
    }
)
_SPACES = re.compile(r"[ \t\r\f\v]+")
# A permalink inside a heading (Sphinx's "#" or "¶", MkDocs' anchors, GitHub's link icon): a glyph, not a word.
_GLYPHS_ONLY = re.compile(r"^[\W_]*$")
_BLANKS = re.compile(r"\n\s*\n+")
_CELLS = ("td", "th")


class _Code(str):
    """The text of a ``<pre>`` block in a builder's buffer: kept as it is, fenced when flushed."""


class _Builder:
    def __init__(self, styles: Styles, skip: frozenset[int] = frozenset()) -> None:
        self.styles = styles
        self.skip = skip  # id() of the furniture elements
        self.path: list[tuple[int, str]] = []
        self.buf: list[str] = []
        self.hidden_chars = 0
        self.sections: list[Section] = []

    def flush(self) -> None:
        text = _joined(self.buf)
        flags = frozenset({"hidden_html"}) if self.hidden_chars >= FLAG_MIN_CHARS else frozenset()
        if text or flags:
            self.sections.append(Section(text=text, page=heading_path(t for _, t in self.path), flags=flags))
        self.buf.clear()
        self.hidden_chars = 0

    def walk(self, node: Tag, ctx: Context, out: list[str]) -> None:
        """Appends the visible text under ``node`` to ``out``; counts what is hidden."""
        for child in node.children:
            if isinstance(child, (Comment, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                text = str(child)
                if ctx.text_invisible and text.strip():
                    self.hidden_chars += _visible_len(text)  # colour of the background, or transparent
                else:
                    out.append(text)
                continue
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name in NON_TEXT_TAGS or id(child) in self.skip:  # not text, or site furniture
                continue
            hidden, inner = self.styles.visibility(child, ctx)
            if hidden or _is_permalink(child, name, out):
                self.hidden_chars += _visible_len(child.get_text()) if hidden else 0
                continue
            if name in _HEADINGS:
                self._heading(child, _HEADINGS[name], inner)
            elif not self._code_or_cell(child, name, inner, out):
                block = name in _BLOCK
                if block:
                    out.append("\n")
                self.walk(child, inner, out)
                if block:
                    out.append("\n")

    def _heading(self, tag: Tag, level: int, ctx: Context) -> None:
        heading = _HeadingText()
        self.walk(tag, ctx, heading)  # only what a reader sees of the heading
        self.flush()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, _clean(" ".join(heading)).replace("\n", " ")))  # cut by heading_path

    def _code_or_cell(self, tag: Tag, name: str, ctx: Context, out: list[str]) -> bool:
        """Walks a ``<pre>`` block as code (True: done); puts `` | `` before a row's later cells."""
        if name == "pre" and not isinstance(out, _HeadingText):
            code: list[str] = []
            self.walk(tag, ctx, code)
            out.append(_Code("".join(code)))
            return True
        if name in _CELLS and tag.find_previous_sibling(_CELLS) is not None:
            out.append(" | ")
        return False


def _is_permalink(tag: Tag, name: str, out: list[str]) -> bool:
    """A self-link made only of glyphs (``<a href="#id">#</a>``), walked as part of a heading."""
    if name != "a" or not isinstance(out, _HeadingText):
        return False
    href = tag.get("href")
    return isinstance(href, str) and href.startswith("#") and bool(_GLYPHS_ONLY.match(tag.get_text()))


class _HeadingText(list[str]):
    """The text of a heading being walked (permalink glyphs are dropped from it)."""


def _visible_len(text: str) -> int:
    return len(text) - sum(1 for ch in text if ch.isspace())


def _joined(buf: list[str]) -> str:
    """The buffer's text cleaned, with each ``<pre>`` block fenced and its lines kept as they are."""
    parts: list[str] = []
    run: list[str] = []
    for piece in buf:
        if isinstance(piece, _Code):
            parts.append(_clean("".join(run)))
            run.clear()
            lines = [ln.rstrip() for ln in piece.split("\n")]
            code = "\n".join(lines).strip("\n")
            parts.append(fenced(code) if code.strip() else "")
        else:
            run.append(piece)
    parts.append(_clean("".join(run)))
    return "\n\n".join(p for p in parts if p)


def _clean(text: str) -> str:
    lines = [_SPACES.sub(" ", ln).strip() for ln in text.split("\n")]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def load_html(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    text = decode_text(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        # We always pass the file's text, never a locator; a file holding only a path
        # (C:\secret\file.txt) made bs4 write 16 lines to stderr, outside the log format.
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        soup = BeautifulSoup(text, "lxml")
    title_tag = soup.find("title")
    title = _clean(title_tag.get_text(" ")) if isinstance(title_tag, Tag) else ""
    if not title:
        h1 = soup.find("h1")
        title = _clean(h1.get_text(" ")) if isinstance(h1, Tag) else path.stem
    styles = Styles([style.get_text() for style in soup.find_all("style")])
    body = soup.body if soup.body is not None else soup
    whole = True
    root: Tag | BeautifulSoup = body
    ctx: Context | None = None
    found = html_main.candidates(soup)
    if not found and isinstance(body, Tag):
        near = html_main.located(text, body)
        found = [near] if near is not None else []
    for candidate in found:
        ctx = _context(styles, candidate)
        if ctx is not None:  # a hidden main element is no main content: the next is tried
            root, whole = candidate, False
            break
    builder = _Builder(styles, frozenset(html_main.furniture(root)) if isinstance(root, Tag) else frozenset())
    ctx = _context(styles, root) if whole else ctx
    title = title.replace("\n", " ")[:MAX_HEADING_CHARS]
    if ctx is None:  # the page itself is hidden
        builder.hidden_chars += _visible_len(body.get_text())
        builder.flush()
        return LoadedDoc(title=title, sections=tuple(builder.sections), whole_body=whole)
    builder.walk(root, ctx, builder.buf)
    builder.flush()
    return LoadedDoc(title=title, sections=tuple(builder.sections), whole_body=whole)


def _context(styles: Styles, el: Tag | BeautifulSoup) -> Context | None:
    """What ``el``'s children inherit from it and its ancestors (the page's own colours and
    background, say); None when it or one of them is hidden."""
    chain = [p for p in el.parents if isinstance(p, Tag) and not isinstance(p, BeautifulSoup)][::-1]
    ctx = Context()
    for tag in [*chain, el] if not isinstance(el, BeautifulSoup) else chain:
        hidden, ctx = styles.visibility(tag, ctx)
        if hidden:
            return None
    return ctx
