"""A passage read as the units a quote is made of: sentences, headings and whole code blocks.

Each unit is a contiguous run of the passage's text, with its offsets (code points), so a quote
built from units is an exact substring of what the document said. Units are scored against the
question by the words they share with it (lexical overlap, with plurals folded): the extractive
answer and the citation snippet run on every answer, and this costs microseconds, where scoring
each sentence by embedding would cost an embedder call per sentence on the request path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["prose", "code", "heading"]

# A fenced code block (as the chunker stores code): an opening fence line to the closing one.
_FENCED = re.compile(r"^(?P<f>`{3,}|~{3,})[^\n]*\n(?:.*?\n)??(?P=f)[`~]*[ \t]*$", re.M | re.S)
# A sentence ends at ., ! or ? (or their CJK forms) before whitespace; a paragraph at a blank line.
_BREAK = re.compile(r"([.!?])\s+|([。！？])\s*|\n[ \t]*\n\s*")
_HEADING_LINE = re.compile(r"[ \t]*#{1,6}[ \t]")
_END_PUNCT = frozenset(".!?:;,。！？)\"'”’")
_WORD = re.compile(r"[^\W_]{3,}")
_STOP = frozenset(
    re.findall(
        r"\S+",
        """the and for are but not you your with this that these those from have has had was were will would
    can could should what which who whom whose when where why how does did doing into onto than then there
    their them they its it's our out about also any all some such only very just more most other""",
    )
)


@dataclass(frozen=True)
class Unit:
    start: int
    end: int
    kind: Kind


def units(text: str) -> list[Unit]:
    """``text`` cut into prose sentences, heading lines and code blocks, in order, whitespace trimmed."""
    out: list[Unit] = []
    pos = 0
    for m in _FENCED.finditer(text):
        out += _prose(text, pos, m.start())
        out.append(Unit(m.start(), m.end(), "code"))
        pos = m.end()
    out += _prose(text, pos, len(text))
    return out


def _prose(text: str, start: int, end: int) -> list[Unit]:
    out: list[Unit] = []
    at = start
    for m in _BREAK.finditer(text, start, end):
        _add(out, text, at, m.start() + 1 if m.group(1) or m.group(2) else m.start())
        at = m.end()
    _add(out, text, at, end)
    return out


def _add(out: list[Unit], text: str, a: int, b: int) -> None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if a >= b:
        return
    # A first line that is a heading (markdown "#", or a short line with no closing punctuation) is a
    # unit of its own: a label (or, alone, a fragment cut at the passage's end), not a sentence to quote.
    nl = text.find("\n", a, b)
    first = text[a:nl] if nl != -1 else text[a:b]
    # A short unpunctuated line is a heading, unless the next line goes on in lower case or with a
    # digit: then it is a sentence wrapped over lines.
    rest = text[nl + 1 : b].lstrip() if nl != -1 else ""
    short = len(first.split()) <= 8 and first.rstrip()[-1:] not in _END_PUNCT
    label = _HEADING_LINE.match(first) is not None or (short and not (rest[:1].islower() or rest[:1].isdigit()))
    if nl == -1:
        out.append(Unit(a, b, "heading" if label else "prose"))
    elif label:
        out.append(Unit(a, a + len(first.rstrip()), "heading"))
        _add(out, text, nl + 1, b)
    else:
        out.append(Unit(a, b, "prose"))


def terms(text: str) -> frozenset[str]:
    """The words of ``text`` that can carry a topic: three letters or more, not a function word,
    a plural folded to its singular."""
    return frozenset(_fold(w) for w in _WORD.findall(text.lower()) if w not in _STOP)


def _fold(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def score(text: str, question_terms: frozenset[str]) -> int:
    """How many of the question's terms ``text`` holds."""
    if not question_terms:
        return 0
    words = set(_WORD.findall(text.lower()))
    # A word matches as written or folded; only words ending in "s" can fold.
    found = question_terms & words
    found |= question_terms & {_fold(w) for w in words if w[-1] == "s"}
    return len(found)
