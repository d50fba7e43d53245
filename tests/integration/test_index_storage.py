"""Where the index keeps what: int8 copies and the BM25 index in RAM, originals and payloads on disk.

Also the write path's sparse vectors: BM25's own ``SparseVector`` goes to the embedded engine as
it is (no copy out to Python lists and back), and to the server as the same indices and weights.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient, models
from qdrant_edge import Bm25, SparseVector

from docquery.core.collection import DENSE_VECTOR, PUBLIC_GROUP, SPARSE_VECTOR, chunk_point_id
from docquery.core.domain import AclFilter, Chunk, IndexedChunk
from docquery.index import IndexTuning, edge, open_edge, open_server, server
from docquery.index.engine import Point, Sparse

DIM = 32


def _config(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((path / "edge_config.json").read_text())
    return out


def test_new_shard_keeps_originals_and_payload_on_disk_and_int8_and_bm25_in_ram(tmp_path: Path) -> None:
    open_edge(tmp_path / "s", name="c", model_id="m", dimension=DIM).close()
    config = _config(tmp_path / "s")
    assert config["vectors"][DENSE_VECTOR]["memory"] == "cold"
    assert config["sparse_vectors"][SPARSE_VECTOR]["memory"] == "pinned"
    assert config["payload_memory"] == "cold"
    assert config["quantization_config"]["scalar"]["memory"] == "pinned"


@pytest.mark.parametrize("tuning", [IndexTuning(originals_on_disk=False), IndexTuning(quantization="none")])
def test_originals_stay_in_ram_when_asked_or_without_int8_copies(tmp_path: Path, tuning: IndexTuning) -> None:
    open_edge(tmp_path / "s", name="c", model_id="m", dimension=DIM, tuning=tuning).close()
    assert _config(tmp_path / "s")["vectors"][DENSE_VECTOR]["memory"] == "cached"


class _Recording(QdrantClient):
    def __init__(self) -> None:
        super().__init__(location=":memory:")
        self.created: dict[str, Any] = {}

    def create_collection(self, collection_name: str, **kwargs: Any) -> bool:  # type: ignore[override]
        self.created = kwargs
        return super().create_collection(collection_name, **kwargs)


@pytest.mark.parametrize(
    ("tuning", "on_disk"),
    [(IndexTuning(), True), (IndexTuning(originals_on_disk=False), False), (IndexTuning(quantization="none"), False)],
)
def test_server_collection_gets_the_same_vector_placement(tuning: IndexTuning, on_disk: bool) -> None:
    client = _Recording()
    open_server(url=":memory:", name="c", model_id="m", dimension=DIM, client=client, tuning=tuning).close()
    assert client.created["vectors_config"][DENSE_VECTOR].on_disk is on_disk
    client.close()


def test_rescoring_reads_the_original_vectors_from_disk_after_a_reopen(tmp_path: Path) -> None:
    """The int8 copies pick candidates; the scores returned are the exact cosines of the on-disk floats."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((3000, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tuning = IndexTuning(full_scan_threshold_kb=16, indexing_threshold_kb=64)
    path = tmp_path / "s"
    index = open_edge(path, name="c", model_id="m", dimension=DIM, tuning=tuning)
    items = []
    for i, vec in enumerate(vectors):
        chunk = Chunk(
            id=chunk_point_id(f"d{i}", "sha", 0),
            doc_id=f"d{i}",
            source="s.txt",
            title="t",
            chunk_index=0,
            text=f"word{i % 50} text",
            content_sha256="sha",
            acl_groups=(PUBLIC_GROUP,),
        )
        items.append(IndexedChunk(chunk=chunk, dense=vec.tolist()))
    index.upsert(items)
    index.flush()
    assert index.optimize() is True
    index.close()
    index = open_edge(path, name="c", model_id="m", dimension=DIM, tuning=tuning)
    try:
        ids = [c.chunk.id for c in items]
        queries = rng.standard_normal((10, DIM)).astype(np.float32)
        for q in queries / np.linalg.norm(queries, axis=1, keepdims=True):
            hits = asyncio.run(
                index.search(dense=q.tolist(), text=None, acl=AclFilter.for_groups({"g1"}), limit=5, mode="dense")
            )
            assert len(hits) == 5
            for h in hits:
                assert h.score == pytest.approx(float(vectors[ids.index(h.chunk.id)] @ q), abs=1e-5)
    finally:
        index.close()


_BM25 = Bm25()


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=400))
def test_bm25_vectors_reach_both_engines_unchanged(text: str) -> None:
    """Any text: Edge gets BM25's own vector object, the server and the seam's copy the same numbers."""
    native = _BM25.embed_document(text)
    point = Point("00000000-0000-0000-0000-000000000001", {}, dense=[0.0] * DIM, sparse=native)
    assert point.vectors(edge._vector)[SPARSE_VECTOR] is native
    copied = edge._vector(Sparse(list(native.indices), list(native.values)))
    assert isinstance(copied, SparseVector)
    assert (copied.indices, copied.values) == (native.indices, native.values)
    on_server = point.vectors(server._vector)[SPARSE_VECTOR]
    assert isinstance(on_server, models.SparseVector)
    assert (on_server.indices, on_server.values) == (native.indices, native.values)


def test_dense_lists_are_passed_without_a_copy_and_other_sequences_become_lists() -> None:
    dense = [0.5] * DIM
    assert Point("p", {}, dense=dense).vectors(edge._vector)[DENSE_VECTOR] is dense
    as_tuple = Point("p", {}, dense=tuple(dense)).vectors(edge._vector)[DENSE_VECTOR]
    assert isinstance(as_tuple, list) and as_tuple == dense
