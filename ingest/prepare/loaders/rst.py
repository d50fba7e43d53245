"""reStructuredText as plain text, without what no renderer shows: comments and unused substitutions.

An explicit markup block starts with ``..`` and runs over the lines indented under it. It is a
comment unless it is a directive (``.. name::``), a footnote or citation (``.. [label]``), a
hyperlink target (``.. _name:``, ``.. __:``) or a substitution definition (``.. |name| ...``); a
substitution definition whose ``|name|`` is never used is not rendered either. Both are dropped, as
the Markdown loader drops comments, and flag their section ``hidden_text`` when they carry text
(threat: instructions a reader never sees, indexed and retrieved). One pass over the lines, plus one
linear scan for the substitution references.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.model import LoadedDoc, Section
from ingest.prepare.loaders.hidden import FLAG_MIN_CHARS
from ingest.prepare.loaders.limits import Limits
from ingest.prepare.loaders.text import first_line_title
from ingest.prepare.loaders.textcodec import decode_text

_MARKUP = re.compile(r"\.\.(?:[ \t]+|$)")
_DIRECTIVE = re.compile(r"[\w.+:-]+::")
_SUBSTITUTION = re.compile(r"\|([^|\s](?:[^|]*[^|\s])?)\|")
_TITLE_PUNCTUATION = "=-~`#*^\"'+:._<>"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _kind(rest: str) -> str:
    """What an explicit markup block holds, from the text after ``.. ``."""
    if _DIRECTIVE.match(rest):
        return "directive"
    if rest.startswith("[") and "]" in rest:
        return "footnote"
    if rest.startswith("_"):
        return "target"
    m = _SUBSTITUTION.match(rest)
    if m:
        return "substitution:" + m.group(1)
    return "comment"


def strip_hidden(text: str) -> tuple[str, int]:
    """(text without comments and unused substitution definitions, characters dropped)."""
    lines = text.splitlines()
    blocks: list[tuple[int, int, str]] = []  # (first line, end line, kind)
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip(" \t")
        m = _MARKUP.match(stripped)
        literal = not m and line.rstrip().endswith("::")
        if not m and not literal:
            i += 1
            continue
        indent = _indent(line)
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
            end += 1
        if m is None:  # a paragraph ending in "::" opens a literal block: what is indented under it is shown as is
            i = end
            continue
        while end > i + 1 and not lines[end - 1].strip():  # trailing blank lines belong to the text
            end -= 1
        rest = stripped[m.end() :]
        blocks.append((i, end, _kind(rest) if rest.strip() else ("comment" if end > i + 1 else "empty")))
        i = end
    defined = {k.split(":", 1)[1] for _, _, k in blocks if k.startswith("substitution:")}
    used: set[str] = set()
    if defined:
        inside = {n for s, e, k in blocks if k.startswith("substitution:") for n in range(s, e)}
        outside = "\n".join(line for n, line in enumerate(lines) if n not in inside)
        used = {m.group(1) for m in _SUBSTITUTION.finditer(outside)} & defined
    drop: set[int] = set()
    hidden = 0
    for start, end, kind in blocks:
        if kind == "comment" or (kind.startswith("substitution:") and kind.split(":", 1)[1] not in used):
            drop.update(range(start, end))
            body = "\n".join(lines[start:end]).lstrip(" \t").removeprefix("..")
            hidden += len("".join(body.split()))
    return "\n".join(line for n, line in enumerate(lines) if n not in drop), hidden


def load_rst(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    text, hidden = strip_hidden(decode_text(data))
    flags = frozenset({"hidden_text"}) if hidden >= FLAG_MIN_CHARS else frozenset()
    title = first_line_title(text, path.stem, strip=_TITLE_PUNCTUATION) if text.strip() else path.stem
    return LoadedDoc(title=title, sections=(Section(text=text, flags=flags),))
