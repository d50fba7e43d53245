"""Test doubles shared across the suite (unit tests use fakes; integration tests use the real components)."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic bag-of-words embedder: texts sharing words get close vectors.

    Fast and dependency-free, for unit and API tests. Integration tests use the
    real bundled model instead.
    """

    def __init__(self, dimension: int = 64, model_id: str = "test/hash-embedder") -> None:
        self._dim = dimension
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self._dim
            for word in _WORD.findall(text.lower()):
                h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
                vec[h % self._dim] += 1.0
            norm = math.sqrt(sum(x * x for x in vec)) or 1.0
            out.append([x / norm for x in vec] if any(vec) else [1.0 / math.sqrt(self._dim)] * self._dim)
        return out

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        """As the local model does it: one hand-off to a worker thread."""
        return await asyncio.to_thread(self.embed, texts, query=query)

    def close(self) -> None:
        """Nothing to release."""

    async def aclose(self) -> None:
        """Nothing to release."""


class AsyncHashEmbedder(HashEmbedder):
    """The same vectors, computed on the event loop as a remote embedder's await would be."""

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        return self.embed(texts, query=query)
