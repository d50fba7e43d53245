"""HTML with a real parser (lxml through BeautifulSoup).

Scripts, styles and other non-text elements are dropped. Hidden elements (the
``hidden`` attribute, ``aria-hidden="true"``, inline or stylesheet rules such as
``display:none``, ``visibility:hidden``, ``font-size:0``, ``opacity:0``,
off-screen positioning, same colour as the background) are dropped too, and the
section they were in is flagged ``hidden_html``. Sections follow h1-h6.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from bs4 import BeautifulSoup, Tag, XMLParsedAsHTMLWarning
from bs4.element import Comment, Doctype, NavigableString, ProcessingInstruction

from ingest.loaders.hidden import FLAG_MIN_CHARS, NON_TEXT_TAGS, attrs_hide, hiding_selectors
from ingest.loaders.limits import Limits
from ingest.loaders.textcodec import decode_text
from ingest.model import LoadedDoc, Section

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCK = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "dd", "details", "dialog", "div", "dl", "dt"),
        *("fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p"),
        *("pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"),
    }
)
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANKS = re.compile(r"\n\s*\n+")


class _Builder:
    def __init__(self, hidden_ids: set[int]) -> None:
        self.hidden_ids = hidden_ids
        self.path: list[tuple[int, str]] = []
        self.buf: list[str] = []
        self.hidden_chars = 0
        self.sections: list[Section] = []

    def flush(self) -> None:
        text = _clean("".join(self.buf))
        flags = frozenset({"hidden_html"}) if self.hidden_chars >= FLAG_MIN_CHARS else frozenset()
        if text or flags:
            page = " > ".join(t for _, t in self.path) or None
            self.sections.append(Section(text=text, page=page, flags=flags))
        self.buf.clear()
        self.hidden_chars = 0

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, (Comment, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self.buf.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name in NON_TEXT_TAGS:
                continue
            if id(child) in self.hidden_ids or attrs_hide(dict(child.attrs)):
                self.hidden_chars += len(re.sub(r"\s", "", child.get_text()))
                continue
            if name in _HEADINGS:
                self.flush()
                level = _HEADINGS[name]
                while self.path and self.path[-1][0] >= level:
                    self.path.pop()
                self.path.append((level, _clean(child.get_text(" ")).replace("\n", " ")[:200]))
                continue
            block = name in _BLOCK
            if block:
                self.buf.append("\n")
            self.walk(child)
            if block:
                self.buf.append("\n")


def _clean(text: str) -> str:
    lines = [_SPACES.sub(" ", ln).strip() for ln in text.split("\n")]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def _hidden_by_stylesheets(soup: BeautifulSoup) -> set[int]:
    hidden: set[int] = set()
    for style in soup.find_all("style"):
        for selector in hiding_selectors(style.get_text()):
            try:
                hidden.update(id(el) for el in soup.select(selector))
            except Exception:  # noqa: S112  # soupsieve rejects pseudo-elements etc.; such rules hide nothing we see
                continue
    return hidden


def load_html(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    text = decode_text(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(text, "lxml")
    title_tag = soup.find("title")
    title = _clean(title_tag.get_text(" ")) if isinstance(title_tag, Tag) else ""
    if not title:
        h1 = soup.find("h1")
        title = _clean(h1.get_text(" ")) if isinstance(h1, Tag) else path.stem
    builder = _Builder(_hidden_by_stylesheets(soup))
    body = soup.body if soup.body is not None else soup
    builder.walk(body)
    builder.flush()
    return LoadedDoc(title=title.replace("\n", " ")[:200], sections=tuple(builder.sections))
