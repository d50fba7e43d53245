"""Questions embedded at the same time by the bundled model share its passes and get their own vectors."""

from __future__ import annotations

import asyncio
import math

import pytest

from docquery.embedders.local import LocalEmbedder

QUESTIONS = [
    "Does vitamin D deficiency raise the risk of respiratory infections?",
    "How do NetworkPolicies select pods?",
    "beta blockers heart rate",
    "What does the mitochondrial electron transport chain produce, and where in the cell does it happen?",
    "ATP",
    "Which enzyme converts angiotensin I to angiotensin II in the lungs?",
]


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_concurrent_questions_share_passes_and_keep_their_vectors(
    local_embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = [local_embedder.embed([q], query=True)[0] for q in QUESTIONS]
    passes: list[int] = []
    encode = local_embedder._encode

    def counted(texts: list[str]) -> list[list[float]]:
        passes.append(len(texts))
        return encode(texts)

    monkeypatch.setattr(local_embedder, "_encode", counted)

    async def together() -> list[list[list[float]]]:
        return await asyncio.gather(*(local_embedder.aembed([q], query=True) for q in QUESTIONS))

    vectors = [v[0] for v in asyncio.run(together())]
    assert sum(passes) == len(QUESTIONS)
    assert len(passes) < len(QUESTIONS)  # all but the first arrive while it runs: at most two passes
    for i, (a, b) in enumerate(zip(vectors, alone, strict=True)):
        assert _cos(a, b) >= 0.9999, i
        assert max(range(len(alone)), key=lambda j: _cos(a, alone[j])) == i


def test_texts_that_are_not_questions_keep_a_pass_per_call(
    local_embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[int] = []
    encode = local_embedder._encode

    def counted(texts: list[str]) -> list[list[float]]:
        passes.append(len(texts))
        return encode(texts)

    monkeypatch.setattr(local_embedder, "_encode", counted)

    async def together() -> list[list[list[float]]]:
        return await asyncio.gather(*(local_embedder.aembed([q]) for q in QUESTIONS[:3]))

    assert len(asyncio.run(together())) == 3
    assert passes == [1, 1, 1]
