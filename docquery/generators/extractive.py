"""The no-LLM generator: quotes the best passages, each quote with its [S#] citation.

This is the embedded default, so the whole pipeline runs on a laptop with no GPU.
The answer says plainly that it is extractive; it never paraphrases and never stitches:
each bullet is one span, a contiguous run of its source's text (sentences next to each other,
or a whole code block), so it is an exact substring of the cited passage but for whitespace
and the passage's own citation markers. Sentences that share the most words with the question
are chosen over the passage's opening (``docquery.chunking.passages``); a span scoring under half
the best one is left out rather than padding the answer, and text left out between two spans
puts them in separate bullets. Code is quoted as the fenced block the chunker stored.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Literal

from docquery.chunking.passages import Unit, score, terms, units
from docquery.core.domain import Prompt

MODEL_NAME = "docquery-extractive"
# A span is kept when it scores at least this share of the best span of its passage.
KEEP_SHARE = 0.5
# A passage's own text cannot cite: a document that holds "[S2]" would otherwise have its quote point at
# another source's citation. Only the marker this generator appends after each quote names a source.
_MARKER = re.compile(r"\[S[0-9]+\]")


class ExtractiveGenerator:
    def __init__(self, *, max_passages: int = 3, max_sentences: int = 3) -> None:
        self._max_passages = max_passages
        self._max_sentences = max_sentences

    @property
    def model(self) -> str:
        return MODEL_NAME

    @property
    def mode(self) -> Literal["generative", "extractive"]:
        return "extractive"

    async def complete(self, prompt: Prompt) -> str:
        return self.render(prompt)

    async def aclose(self) -> None:
        """Nothing here belongs to an event loop."""

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        for line in self.render(prompt).splitlines(keepends=True):
            yield line

    def render(self, prompt: Prompt) -> str:
        lines = ["Extractive answer (no language model configured): the most relevant passages.", ""]
        question = terms(prompt.question)
        for i, hit in enumerate(prompt.sources[: self._max_passages], start=1):
            text = hit.chunk.text
            for span in best_spans(text, question, self._max_sentences):
                lines.append(_bullet(text[span.start : span.end], span.kind == "code", i))
        return "\n".join(lines) + "\n"


def best_spans(text: str, question: frozenset[str], limit: int) -> list[Unit]:
    """Up to ``limit`` units of ``text`` that answer ``question`` best, merged into one span where they
    are next to each other in one paragraph; the opening sentence when nothing matches."""
    all_units = units(text)
    quotable = [(i, u) for i, u in enumerate(all_units) if u.kind != "heading"]
    if not quotable:
        return []
    scored = [(score(text[u.start : u.end], question), i, u) for i, u in quotable]
    best = max(s for s, _, _ in scored)
    if best == 0:
        return [quotable[0][1]]
    ranked = sorted((x for x in scored if x[0] >= best * KEEP_SHARE), key=lambda x: (-x[0], x[1]))[:limit]
    spans: list[Unit] = []
    last = -2
    for _, i, unit in sorted(ranked, key=lambda x: x[1]):
        prev = spans[-1] if spans else None
        if (
            prev is not None
            and i == last + 1
            and prev.kind == unit.kind == "prose"
            and _same_paragraph(text, prev, unit)
        ):
            spans[-1] = Unit(prev.start, unit.end, "prose")  # neighbours in one paragraph: one span
        else:
            spans.append(unit)
        last = i
    return spans


def _same_paragraph(text: str, a: Unit, b: Unit) -> bool:
    return "\n\n" not in "".join(text[a.end : b.start].split(" "))


def _bullet(span: str, code: bool, source: int) -> str:
    if not code:
        return f"- {' '.join(_MARKER.sub('', span).split())} [S{source}]"
    # The marker first, then the block as stored, indented into the item.
    return f"- [S{source}]\n\n" + "\n".join(f"  {line}" if line.strip() else "" for line in span.split("\n"))
