"""The synthetic corpus the scale benchmark draws (``scale.py``; its tests pin the draws).

Random unit vectors, and chunk text drawn from a random vocabulary, Zipf-like with its 50
most frequent ranks cut (BM25 drops stopwords, and random letter strings are not on its list,
so the head of the curve is cut here instead), so BM25 has realistic posting lists. Chunk ``i``
belongs to one ACL group, and 1 chunk in 20 is public. Every draw comes from the generator the
caller passes, in the caller's order, so a seed always gives the same corpus.
"""

from __future__ import annotations

import numpy as np

from docquery.core.collection import PUBLIC_GROUP, chunk_point_id
from docquery.core.domain import Chunk, IndexedChunk

DIM = 384
GROUPS = 10
VOCABULARY = 20_000


def vocabulary(rng: np.random.Generator, size: int = VOCABULARY) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(size)]


def word_distribution(size: int) -> np.ndarray:
    """Zipf over ``size`` words minus the 50 most frequent ranks."""
    zipf = 1.0 / np.arange(51, size + 51)
    out: np.ndarray = zipf / zipf.sum()
    return out


def unit_vectors(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


class TextMaker:
    """Chunk and query text over one random vocabulary."""

    def __init__(self, rng: np.random.Generator, size: int = VOCABULARY) -> None:
        self.words = vocabulary(rng, size)
        self.p = word_distribution(size)
        self.rng = rng

    def texts(self, n: int, lo: int, hi: int) -> list[str]:
        """``n`` texts of ``lo`` to ``hi - 1`` words, drawn in two calls (all lengths, then all words)."""
        lengths = self.rng.integers(lo, hi, size=n)
        ids = self.rng.choice(len(self.words), size=int(lengths.sum()), p=self.p)
        out, at = [], 0
        for k in lengths:
            out.append(" ".join(self.words[w] for w in ids[at : at + k]))
            at += int(k)
        return out

    def text(self, lo: int, hi: int) -> str:
        """One text of ``lo`` to ``hi - 1`` words, drawn on its own (length, then words)."""
        ids = self.rng.choice(len(self.words), size=int(self.rng.integers(lo, hi)), p=self.p)
        return " ".join(self.words[w] for w in ids)


def group_of(i: int, groups: int = GROUPS) -> str:
    return PUBLIC_GROUP if i % 20 == 0 else f"g{i % groups}"


def synthetic_chunk(i: int, body: str, dense: list[float], groups: int = GROUPS) -> IndexedChunk:
    """Chunk ``i`` of the corpus: four chunks per document, one ACL group each."""
    doc_id = f"doc{i // 4}"
    chunk = Chunk(
        id=chunk_point_id(doc_id, "sha", i % 4),
        doc_id=doc_id,
        source=f"{doc_id}.txt",
        title=doc_id,
        chunk_index=i % 4,
        text=body,
        content_sha256="sha",
        acl_groups=(group_of(i, groups),),
    )
    return IndexedChunk(chunk=chunk, dense=dense)


def percentile(sorted_ms: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks of an ascending list."""
    k = (len(sorted_ms) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (k - lo)
