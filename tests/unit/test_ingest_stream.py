"""Scheduling of the overlapped ingest stages: how far parsing runs ahead of the embedder.

The parser must be able to keep a whole embed call's worth ready while the embedder is busy,
whatever the chunks per document, and must stop at the budget. These tests hold the embedder
inside a call and count what the parser prepared meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from docquery.core.domain import Chunk, DocumentRecord, IndexedChunk
from ingest.model import PlannedDoc, PreparedDoc, SourceFile
from ingest.report.progress import NullProgress
from ingest.report.summary import Report
from ingest.write.stream import StreamConfig, index_documents


class GatedEmbedder:
    """Blocks inside its first call until released; records every call's size."""

    model_id = "test/gated"
    dimension = 4

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.inside = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        self.sizes.append(len(texts))
        if len(self.sizes) == 1:
            self.inside.set()
            assert self.release.wait(10)
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]


class RecordingIndex:
    """Keeps points and records in memory, and the order of the writes per document."""

    def __init__(self) -> None:
        self.points: dict[str, IndexedChunk] = {}
        self.records: dict[str, DocumentRecord] = {}
        self.log: list[tuple[str, str]] = []  # (operation, doc_id)

    def put_document(self, record: DocumentRecord) -> None:
        self.put_documents([record])

    def put_documents(self, records: Sequence[DocumentRecord]) -> None:
        for r in records:
            self.records[r.doc_id] = r
            self.log.append((r.status, r.doc_id))

    def upsert(self, items: Sequence[IndexedChunk]) -> None:
        self.points.update({i.chunk.id: i for i in items})
        self.log.extend(("chunk", i.chunk.doc_id) for i in items)

    def delete_chunks(self, doc_id: str, *, keep_ids: Sequence[str]) -> int:
        self.log.append(("delete", doc_id))
        gone = [k for k, v in self.points.items() if v.chunk.doc_id == doc_id and k not in keep_ids]
        for k in gone:
            del self.points[k]
        return len(gone)


def _planned(n: int) -> list[PlannedDoc]:
    src = SourceFile(root=Path("/r"), path=Path("/r/x"), rel="x", acl_groups=("g",), acl_origin="--groups")
    return [PlannedDoc(source=src, doc_id=f"d{i}", content_sha256="0" * 64, previous=None) for i in range(n)]


class CountingPrepare:
    def __init__(self, chunks_per_doc: dict[str, int] | int) -> None:
        self.per_doc = chunks_per_doc
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, planned: PlannedDoc) -> PreparedDoc:
        with self.lock:
            self.calls += 1
        n = self.per_doc if isinstance(self.per_doc, int) else self.per_doc[planned.doc_id]
        chunks = [
            Chunk(id=f"{planned.doc_id}-{i}", doc_id=planned.doc_id, source="x", title="t", chunk_index=i,
                  text=f"chunk {i}", content_sha256=planned.content_sha256, acl_groups=("g",))
            for i in range(n)
        ]  # fmt: skip
        record = DocumentRecord(
            doc_id=planned.doc_id, source="x", root="/r", content_sha256=planned.content_sha256,
            chunk_count=n, acl_groups=("g",),
        )  # fmt: skip
        return PreparedDoc(planned, record, chunks, [False] * n, [c.text for c in chunks])


def _run(docs: list[PlannedDoc], prepare: CountingPrepare, embedder: GatedEmbedder, cfg: StreamConfig) -> tuple:
    index, report = RecordingIndex(), Report()
    worker = threading.Thread(
        target=index_documents,
        args=(docs,),
        kwargs={"prepare": prepare, "embedder": embedder, "index": index, "cfg": cfg, "report": report,
                "progress": NullProgress()},
    )  # fmt: skip
    worker.start()
    return worker, index, report


def _settled(read: object, timeout: float = 5.0) -> int:
    """The value of ``read()`` once it has stopped changing for 0.2 s."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()  # type: ignore[operator]
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = read()  # type: ignore[operator]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 0.2:
            return int(last)
    raise AssertionError("did not settle")


@pytest.mark.slow  # waits for the parser to stay idle for 0.2 s
def test_short_documents_keep_two_calls_ready_while_the_embedder_works() -> None:
    # One chunk per document: a bound counted in documents would hold fewer chunks than a call.
    cfg = StreamConfig(embed_batch=8, upsert_batch=8, first_batch=2, min_partial_batch=1)
    embedder, prepare = GatedEmbedder(), CountingPrepare(1)
    worker, index, report = _run(_planned(60), prepare, embedder, cfg)
    try:
        assert embedder.inside.wait(5)
        # The first call started after two chunks; meanwhile the parser filled the budget
        # (16 chunks waiting) and holds one more document it cannot hand over yet.
        assert embedder.sizes == [2]
        assert _settled(lambda: prepare.calls) == 2 + 16 + 1
    finally:
        embedder.release.set()
        worker.join(10)
    assert not worker.is_alive()
    assert embedder.sizes[0] == 2 and sum(embedder.sizes) == 60
    # Every later call but the last is full: the next call's chunks were always waiting.
    assert all(size == 8 for size in embedder.sizes[1:-1])
    assert len(index.points) == 60 and report.chunks_written == 60 and report.added == 60
    # Records are written in batches; per document the crash-safe order still holds.
    for doc in (f"d{i}" for i in range(60)):
        ops = [op for op, d in index.log if d == doc]
        assert ops == ["pending", "chunk", "delete", "indexed"], (doc, ops)


def test_a_document_larger_than_the_whole_budget_still_passes() -> None:
    # d0's 3 chunks are fewer than the first call needs (4), so the embedder waits for more while
    # holding 3 of the 8; d1 must not then wait for the whole budget (a deadlock, seen before the
    # per-document cap). It takes at most one call's worth and passes with that.
    cfg = StreamConfig(embed_batch=4, upsert_batch=4, first_batch=4)
    per_doc = {"d0": 3, "d1": 50, "d2": 2}
    embedder, prepare = GatedEmbedder(), CountingPrepare(per_doc)
    embedder.release.set()
    worker, index, report = _run(_planned(3), prepare, embedder, cfg)
    worker.join(10)
    assert not worker.is_alive()
    assert sum(embedder.sizes) == 55 and max(embedder.sizes) <= 4
    assert len(index.points) == 55 and report.added == 3
    assert all(r.status == "indexed" for r in index.records.values())


@pytest.mark.slow  # waits for the parser to stay idle for 0.2 s
@pytest.mark.parametrize("chunks_per_doc", [0, 3])
def test_the_parser_stops_at_the_budget_for_any_document_size(chunks_per_doc: int) -> None:
    cfg = StreamConfig(embed_batch=6, upsert_batch=6, first_batch=3)
    # Documents without chunks hold no budget; the one chunked document after them starts the call.
    per_doc = {f"d{i}": (chunks_per_doc if i else 3) for i in range(40)}
    embedder, prepare = GatedEmbedder(), CountingPrepare(per_doc)
    worker, _, report = _run(_planned(40), prepare, embedder, cfg)
    try:
        assert embedder.inside.wait(5)
        prepared = _settled(lambda: prepare.calls)
        if chunks_per_doc:
            assert prepared == 1 + 12 // chunks_per_doc + 1  # the first document, a full budget, one waiting
        else:
            assert prepared == 40  # empty documents never wait
    finally:
        embedder.release.set()
        worker.join(10)
    assert not worker.is_alive() and report.added == 40
