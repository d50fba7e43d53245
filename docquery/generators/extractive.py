"""The no-LLM generator: quotes the best passages, each with its [S#] citation.

This is the embedded default, so the whole pipeline runs on a laptop with no GPU.
The answer says plainly that it is extractive; it never paraphrases.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Literal

from docquery.core.domain import Prompt

MODEL_NAME = "docquery-extractive"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]{3,}")
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
        terms = set(_WORD.findall(prompt.question.lower()))
        for i, hit in enumerate(prompt.sources[: self._max_passages], start=1):
            lines.append(f"- {self._best_sentences(hit.chunk.text, terms)} [S{i}]")
        return "\n".join(lines) + "\n"

    def _best_sentences(self, text: str, terms: set[str]) -> str:
        sentences = [s.strip() for s in _SENTENCE.split(" ".join(_MARKER.sub("", text).split())) if s.strip()]
        if not sentences:
            return ""
        ranked = sorted(
            range(len(sentences)),
            key=lambda i: (-len(terms & set(_WORD.findall(sentences[i].lower()))), i),
        )
        keep = sorted(ranked[: self._max_sentences])
        return " ".join(sentences[i] for i in keep)
