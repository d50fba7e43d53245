"""Markdown: sections by ATX (``#``) headings, heading path kept per section.

Markdown renders inline HTML, so what a renderer hides is dropped, and flags its section
``hidden_html`` when it is long enough to carry text: HTML comments, hidden inline HTML
elements (``ingest.prepare.loaders.hidden``: inline styles, ``<font color>``, a closed ``<dialog>``,
the ``hidden`` attribute), and link reference definitions, whose label and title never render
(``[//]: # (a comment)`` is the usual Markdown comment). Every step is linear in the input
(threat: a parser bomb stalling a Job): no pattern here can backtrack over a whole line or file.
"""

from __future__ import annotations

import re
from pathlib import Path

from docquery.chunking.code import fence_sessions
from ingest.model import LoadedDoc, Section
from ingest.prepare.loaders.hidden import FLAG_MIN_CHARS, NON_TEXT_TAGS, attrs_hide, inline_hides
from ingest.prepare.loaders.limits import MAX_HEADING_CHARS, Limits, heading_path
from ingest.prepare.loaders.textcodec import decode_text

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_OPEN_TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9]{0,31})(\s[^<>]{0,4000})?>")
_ATTR = re.compile(r"([a-zA-Z_:][-a-zA-Z0-9_:.]{0,63})(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?")
# A link reference definition on one line: [label]: destination "title" / 'title' / (title).
_LINK_REF = re.compile(r" {0,3}\[([^\]\n]{1,999})\]:[ \t]*(\S*)[ \t]*((?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\))?)[ \t]*")


def _heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line; the closing ``#`` run is stripped without a regex."""
    m = _ATX.match(line)
    if m is None:
        return None
    text = line[m.end() :].rstrip(" \t")
    stripped = text.rstrip("#")
    if stripped != text and (not stripped or stripped[-1] in " \t"):
        text = stripped.rstrip(" \t")  # a closing sequence needs a space before it
    return len(m.group(1)), text.strip()


def _attrs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _ATTR.finditer(text):
        value = m.group(2) or ""
        out.setdefault(m.group(1).lower(), value[1:-1] if value[:1] in "\"'" else value)
    return out


def _hides(tag: str, attrs: dict[str, str]) -> bool:
    if attrs_hide(tag, attrs) or tag in NON_TEXT_TAGS:
        return True
    style = attrs.get("style", "")
    color = attrs.get("color", "") if tag == "font" else ""
    return bool((style and inline_hides(style)) or (color and inline_hides(f"color: {color}")))


def _drop_comments(text: str) -> tuple[str, int]:
    """Removes HTML comments by scanning, never by a pattern that rescans an unclosed ``<!--``."""
    out: list[str] = []
    pos = hidden = 0
    while (start := text.find("<!--", pos)) != -1:
        end = text.find("-->", start + 4)
        out.append(text[pos:start])
        stop = len(text) if end == -1 else end + 3  # never closed: hidden to the end, as rendered
        hidden += _visible_len(text[start + 4 : stop - 3 if end != -1 else stop])
        pos = stop
    out.append(text[pos:])
    return "".join(out), hidden


def _visible_len(text: str) -> int:
    return len(text) - sum(1 for ch in text if ch.isspace())


def _element_end(text: str, tag: str, start: int) -> tuple[int, int]:
    """(body end, element end) of the element whose opening tag ends at ``start``; nesting-aware."""
    depth = 1
    for m in re.compile(rf"<(/?){re.escape(tag)}\b[^<>]{{0,4000}}>", re.IGNORECASE).finditer(text, start):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return m.start(), m.end()
    return len(text), len(text)  # never closed: hidden to the end, as a browser would render it


def _drop_hidden_html(text: str) -> tuple[str, int]:
    """Removes HTML comments and hidden inline elements; returns (text, hidden characters)."""
    text, hidden = _drop_comments(text)
    out: list[str] = []
    pos = 0
    for m in _OPEN_TAG.finditer(text):
        if m.start() < pos:
            continue
        tag = m.group(1).lower()
        if not _hides(tag, _attrs(m.group(2) or "")):
            continue
        body_end, end = _element_end(text, tag, m.end())
        if tag not in NON_TEXT_TAGS:
            hidden += _visible_len(re.sub(r"<[^<>]{0,4000}>", "", text[m.end() : body_end]))
        out.append(text[pos : m.start()])
        pos = end
    out.append(text[pos:])
    return "".join(out), hidden


def _drop_link_refs(lines: list[str]) -> tuple[list[str], int]:
    """Link reference definitions render as nothing; their label and title are hidden text."""
    kept: list[str] = []
    hidden = 0
    for line in lines:
        m = _LINK_REF.fullmatch(line) if "]:" in line else None
        if m is None:
            kept.append(line)
        else:
            comment_idiom = m.group(2) in ("#", "<>", "")  # [a comment]: # or [//]: # (a comment)
            hidden += _visible_len(m.group(3)) + (_visible_len(m.group(1)) if comment_idiom else 0)
    return kept, hidden


def split_sections(text: str) -> list[tuple[list[str], str, int]]:
    """(heading path, body, hidden characters) triples; headings inside fenced code are body text."""
    out: list[tuple[list[str], str, int]] = []
    path: list[tuple[int, str]] = []
    buf: list[str] = []
    fence: str | None = None

    def flush() -> None:
        kept, hidden = _drop_link_refs(buf)
        body = "\n".join(kept).strip("\n")
        if body.strip() or hidden:
            out.append(([t for _, t in path], body, hidden))
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
        heading = _heading(line)
        if heading is not None:
            flush()
            level, title = heading
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, title))  # cut by heading_path
            continue
        buf.append(line)
    flush()
    return out


def _title(raw: str, fallback: str) -> str:
    for line in raw.splitlines():
        heading = _heading(line)
        if heading is not None:
            return heading[1][:MAX_HEADING_CHARS] or fallback
        if line.strip():
            return line.strip()[:MAX_HEADING_CHARS]
    return fallback


def load_markdown(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    raw = decode_text(data)
    sections: list[Section] = []
    for heads, body, ref_hidden in split_sections(raw):
        clean, hidden = _drop_hidden_html(body)
        hidden += ref_hidden
        flags = frozenset({"hidden_html"}) if hidden >= FLAG_MIN_CHARS else frozenset()
        if clean.strip() or flags:
            sections.append(Section(text=fence_sessions(clean), page=heading_path(heads), flags=flags))
    return LoadedDoc(title=_title(raw, path.stem), sections=tuple(sections))
