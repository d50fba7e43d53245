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
_HIDDEN_ELEMENT = re.compile(
    r"<(?P<tag>[a-zA-Z][a-zA-Z0-9]*)(?P<attrs>[^>]*)>(?P<body>.*?)</(?P=tag)\s*>",
    re.S,
)


def _drop_hidden_html(text: str) -> tuple[str, int]:
    hidden_chars = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal hidden_chars
        attrs = m.group("attrs").lower()
        style = re.search(r"style\s*=\s*[\"']([^\"']*)[\"']", attrs)
        if (
            re.search(r"(?:^|\s)hidden(?:\s|=|$)", attrs)
            or re.search(r"aria-hidden\s*=\s*[\"']?true", attrs)
            or (style and style_hides(style.group(1)))
        ):
            hidden_chars += len(re.sub(r"<[^>]+>|\s", "", m.group("body")))
            return ""
        return m.group(0)

    return _HIDDEN_ELEMENT.sub(repl, _HTML_COMMENT.sub("", text)), hidden_chars


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
