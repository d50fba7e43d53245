"""Citations: what each returned passage is, and the snippet that shows why it was returned.

A snippet is the passage's most relevant sentence or sentences (``docquery.chunking.passages``: the
units sharing the most words with the question; the first quotable one when none does): a
contiguous run of the passage, at least ``MIN_SNIPPET`` characters unless the passage is
shorter, at most ``SNIPPET_CHARS``, never a heading or a lone prompt (``>>>``). Its offsets
(``snippet_start``, ``snippet_end``, code points into the passage) say where it is; its text is
that run with control and bidi characters removed (line feed and tab stay). A quote must be
verifiable, so nothing is added (no ellipsis) or rewritten; a sentence the sanitiser would change
(markup, links: exfiltration through the reader's browser) is never chosen, and a passage with
nothing else quotable (only headings, prompts, code or such sentences) has an empty snippet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from docquery.chunking.passages import Unit, score, terms, units
from docquery.core.domain import Citation, Hit

SNIPPET_CHARS = 300
MIN_SNIPPET = 40
# What no returned field carries: C0 and C1 controls but tab and line feed, line and paragraph
# separators, and bidi embeddings, overrides and isolates (they reorder what a reader sees).
FIELD_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_THREE_ALNUM = re.compile(r"[^\W_](?:.*?[^\W_]){2}", re.S)


def citations_for(hits: Sequence[Hit], *, clean: Callable[[str], str], question: str = "") -> list[Citation]:
    """``[S1]``... for ``hits``; ``clean`` (the output sanitiser) decides which runs may be a snippet. Title,
    source and page are left as the document gave them: the caller makes them plain text."""
    wanted = terms(question)
    out = []
    for i, h in enumerate(hits, start=1):
        text = h.chunk.text
        start, end = snippet_span(text, wanted, clean)
        out.append(
            Citation(
                id=f"S{i}",
                doc_id=h.chunk.doc_id,
                source=h.chunk.source,
                title=h.chunk.title,
                chunk_index=h.chunk.chunk_index,
                score=round(h.score, 6),
                snippet=FIELD_CONTROLS.sub("", text[start:end]),
                snippet_start=start,
                snippet_end=end,
                page=h.chunk.page,
                section=h.chunk.section,
                char_start=h.chunk.char_start,
                char_end=h.chunk.char_end,
                snippet_truncated=(start, end) != (0, len(text)),
            )
        )
    return out


def snippet_span(text: str, question: frozenset[str], clean: Callable[[str], str]) -> tuple[int, int]:
    """Where the snippet of ``text`` is, for a question with these ``terms``."""
    candidates = [u for u in units(text) if _quotable(text[u.start : u.end], u)]
    if question:
        ranked = sorted(candidates, key=lambda u: (-score(text[u.start : u.end], question), u.start))
    else:
        ranked = candidates
    # Only runs the sanitiser leaves alone are grown together, so a safe sentence is never given up
    # for a neighbour with markup. Checked as needed: most passages answer with their first candidate.
    checked: dict[int, bool] = {}

    def safe(unit: Unit) -> bool:
        if unit.start not in checked:
            checked[unit.start] = _unchanged(text[unit.start : unit.end], clean)
        return checked[unit.start]

    for unit in ranked:
        if safe(unit):
            return _grown(text, candidates, unit, safe)
    return 0, 0  # nothing quotable that the sanitiser leaves alone: no snippet rather than a changed one


def _quotable(piece: str, unit: Unit) -> bool:
    if unit.kind != "prose":
        return False  # a heading is a label, and code goes out in answers, not as a one-line quote
    # Three letters or digits at least: a lone prompt (">>>", "...", "$") or a bullet mark is not a quote.
    return _THREE_ALNUM.search(piece) is not None


def _grown(text: str, candidates: list[Unit], unit: Unit, safe: Callable[[Unit], bool]) -> tuple[int, int]:
    """``unit``, joined to the quotable units after it (then before it) while it is shorter than
    ``MIN_SNIPPET`` and they are next to it; cut at a word boundary past ``SNIPPET_CHARS``."""
    start, end = unit.start, unit.end
    at = candidates.index(unit)
    after, before = candidates[at + 1 :], candidates[:at][::-1]
    for neighbour in [*after, *before]:
        if end - start >= MIN_SNIPPET:
            break
        if not safe(neighbour):
            continue
        if neighbour.start >= end and not text[end : neighbour.start].strip():
            end = neighbour.end
        elif neighbour.end <= start and not text[neighbour.end : start].strip():
            start = neighbour.start
    if end - start > SNIPPET_CHARS:
        cut = max(text.rfind(s, start, start + SNIPPET_CHARS + 1) for s in " \n\t")
        end = start + len(text[start:cut].rstrip()) if cut > start else start + SNIPPET_CHARS
    return start, end


def _unchanged(text: str, clean: Callable[[str], str]) -> bool:
    """Whether ``clean`` leaves the words of ``text`` as it goes out (controls removed) as they are
    (its whitespace may differ)."""
    out = FIELD_CONTROLS.sub("", text)
    return clean(out).split() == out.split()
