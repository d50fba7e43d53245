"""Markdown: sections by ATX (``#``) headings, heading path kept per section.

Markdown renders inline HTML, so HTML comments and hidden HTML elements are
invisible to a reader; they are dropped, and hidden elements flag their section.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.loaders.hidden import FLAG_MIN_CHARS, style_hides
from ingest.loaders.limits import Limits
from ingest.loaders.textcodec import decode_text
from ingest.model import LoadedDoc, Section

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_OPEN_TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)(\s[^<>]*)?>")
_STYLE_ATTR = re.compile(r"style\s*=\s*[\"']([^\"']*)[\"']")


def _attrs_hide(attrs: str) -> bool:
    style = _STYLE_ATTR.search(attrs)
    return bool(
        re.search(r"(?:^|\s)hidden(?:\s|=|$)", attrs)
        or re.search(r"aria-hidden\s*=\s*[\"']?true", attrs)
        or (style and style_hides(style.group(1)))
    )


def _element_end(text: str, tag: str, start: int) -> tuple[int, int]:
    """(body end, element end) of the element whose opening tag ends at ``start``; nesting-aware."""
    depth = 1
    for m in re.compile(rf"<(/?){tag}\b[^<>]*>", re.IGNORECASE).finditer(text, start):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return m.start(), m.end()
    return len(text), len(text)  # never closed: hidden to the end, as a browser would render it


def _drop_hidden_html(text: str) -> tuple[str, int]:
    """Removes HTML comments and hidden inline elements; returns (text, hidden characters)."""
    text = _HTML_COMMENT.sub("", text)
    out: list[str] = []
    pos = hidden = 0
    for m in _OPEN_TAG.finditer(text):
        if m.start() < pos or not _attrs_hide((m.group(2) or "").lower()):
            continue
        body_end, end = _element_end(text, m.group(1), m.end())
        hidden += len(re.sub(r"<[^>]+>|\s", "", text[m.end() : body_end]))
        out.append(text[pos : m.start()])
        pos = end
    out.append(text[pos:])
    return "".join(out), hidden


def split_sections(text: str) -> list[tuple[list[str], str]]:
    """(heading path, body) pairs; headings inside fenced code are body text."""
    out: list[tuple[list[str], str]] = []
    path: list[tuple[int, str]] = []
    buf: list[str] = []
    fence: str | None = None

    def flush() -> None:
        body = "\n".join(buf).strip("\n")
        if body.strip():
            out.append(([t for _, t in path], body))
        buf.clear()

    for line in text.splitlines():
        fm = _FENCE.match(line)
        if fm:
            marker = fm.group(1)[0] * 3
            fence = None if fence and marker == fence else (fence or marker)
            buf.append(line)
            continue
        if fence:
            buf.append(line)
            continue
        m = _ATX.match(line)
        if m:
            flush()
            level, title = len(m.group(1)), m.group(2).strip()
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, title))
            continue
        buf.append(line)
    flush()
    return out


def load_markdown(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    raw = decode_text(data)
    title = path.stem
    for line in raw.splitlines():
        m = _ATX.match(line)
        if m:
            title = m.group(2).strip()[:200] or title
            break
        if line.strip():
            title = line.strip()[:200]
            break
    sections: list[Section] = []
    for heads, body in split_sections(raw):
        clean, hidden = _drop_hidden_html(body)
        flags = frozenset({"hidden_html"}) if hidden >= FLAG_MIN_CHARS else frozenset()
        if clean.strip() or flags:
            sections.append(Section(text=clean, page=" > ".join(heads) or None, flags=flags))
    return LoadedDoc(title=title, sections=tuple(sections))
