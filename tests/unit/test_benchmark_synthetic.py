"""The shared synthetic corpus (benchmarks/synthetic.py) generates what each benchmark generated before it.

The digest was taken from ``scale.py`` as it was before the shared module existed (with its own copy
of the generator), for seed 42, 4,500 chunks
(past one 2,000-chunk write batch) and 150 queries. A changed draw order, vocabulary, Zipf
weight, ACL group or chunk field changes a digest, and the benchmark figures recorded in
docs/benchmarks.md would then no longer be comparable with new runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from benchmarks import scale
from benchmarks.synthetic import TextMaker, group_of, percentile
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.domain import IndexedChunk
from docquery.index.engine import Stats

CHUNKS, QUERIES, SEED = 4500, 150, 42
SCALE_SHA256 = "d3c6e8220a5f24214262186e15886aa9a98a5a09a9085bbb9c39d926cc55bf6c"


class Recorder:
    """Stands in for the index: digests every chunk written, in order."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.written = 0

    def upsert(self, items: Sequence[IndexedChunk]) -> None:
        for item in items:
            c = item.chunk
            fields = (c.id, c.doc_id, c.source, c.title, c.chunk_index, c.text, c.content_sha256, c.acl_groups)
            self.digest.update(repr(fields).encode())
            self.digest.update(np.asarray(item.dense, dtype=np.float64).tobytes())
            self.written += 1

    def flush(self) -> None:
        """Nothing buffered."""

    def stats(self) -> Stats:
        """No segment is ever sealed here (build() subtracts the seal time from the write time)."""
        return Stats(points=self.written, indexed_vectors=0, segments=1)

    def add_queries(self, vectors: np.ndarray, texts: list[str]) -> str:
        self.digest.update(np.asarray(vectors, dtype=np.float64).tobytes())
        self.digest.update("\n".join(texts).encode())
        return self.digest.hexdigest()


def test_scale_corpus_is_unchanged() -> None:
    rng = np.random.default_rng(SEED)
    text = TextMaker(rng)
    rec = Recorder()
    scale.build(rec, CHUNKS, rng, text)  # only upsert, flush and stats are called
    digest = rec.add_queries(scale.unit_vectors(rng, QUERIES), text.texts(QUERIES, 3, 9))
    assert rec.written == CHUNKS
    assert digest == SCALE_SHA256


def test_groups_and_percentiles() -> None:
    assert [group_of(i) for i in (0, 1, 9, 10, 20, 21)] == [PUBLIC_GROUP, "g1", "g9", "g0", PUBLIC_GROUP, "g1"]
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([1.0, 2.0], 99) == 1.99
    assert percentile([7.0], 99) == 7.0
