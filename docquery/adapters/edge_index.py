"""Embedded vector index on qdrant-edge-py: Qdrant's own engine, in-process.

The shard lives under ``<data_dir>/collections/<name>`` and survives restarts
(the WAL replays after a crash). One process may open a shard at a time; a
second open fails with a clear error instead of corrupting it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qdrant_edge import (
    Bm25,
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    HasIdCondition,
    MatchAny,
    MatchValue,
    Modifier,
    PayloadSchemaType,
    Point,
    Prefetch,
    Query,
    QueryBatchRequest,
    QueryRequest,
    ScoredPoint,
    ScrollRequest,
    UpdateOperation,
)

from docquery.adapters.fusion import FusionParams, cosine_scores, fuse_convex
from docquery.adapters.payload import (
    chunk_from_payload,
    chunk_payload,
    document_from_payload,
    document_payload,
    meta_payload,
    sort_hits_key,
)
from docquery.collection import (
    CHUNK_KINDS,
    DENSE_VECTOR,
    INDEXED_BOOLS,
    INDEXED_KEYWORDS,
    META_POINT_ID,
    SPARSE_VECTOR,
    Key,
    Kind,
    check_collection_meta,
    document_point_id,
)
from docquery.domain import AclFilter, DocumentRecord, Hit, IndexedChunk
from docquery.errors import VectorIndexError
from docquery.ports import SearchMode, TextCipher

_SCROLL_PAGE = 512


def _kind(kind: Kind) -> FieldCondition:
    return FieldCondition(key=Key.KIND, match=MatchValue(kind.value))


def _any_chunk() -> FieldCondition:
    """Chunks of every kind, quarantined included: for maintenance, never for search."""
    return FieldCondition(key=Key.KIND, match=MatchAny(any=list(CHUNK_KINDS)))


def _doc(doc_id: str) -> FieldCondition:
    return FieldCondition(key=Key.DOC_ID, match=MatchValue(doc_id))


def acl_chunk_filter(acl: AclFilter) -> Filter:
    # Applied inside the vector query (and each prefetch): post-filtering top-k
    # would both leak timing and starve callers of their own documents.
    # kind == chunk also excludes quarantined chunks (their own kind), documents and meta.
    return Filter(
        must=[_kind(Kind.CHUNK), FieldCondition(key=Key.ACL_GROUPS, match=MatchAny(any=list(acl.labels)))],
    )


class EdgeIndex:
    """VectorIndex + DocumentCatalog on an embedded Qdrant Edge shard."""

    # qdrant-edge computes a query without releasing the GIL (tests/integration/test_query_placement.py
    # keeps this true): a search on a worker thread stalls the event loop just the same.
    search_releases_gil = False

    def __init__(
        self,
        path: Path,
        *,
        name: str,
        model_id: str,
        dimension: int,
        fusion: FusionParams | None = None,
        cipher: TextCipher | None = None,
    ) -> None:
        self.name = name
        self._path = path
        self._fusion = fusion or FusionParams()
        self._cipher = cipher
        self._bm25 = Bm25()
        self._lock = threading.Lock()
        self._closed = False
        try:
            if (path / "edge_config.json").exists():
                self._shard = EdgeShard.load(str(path))
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._shard = EdgeShard.create(str(path), self._config(dimension))
                self._create_indexes()
        except Exception as exc:  # qdrant_edge raises plain Exception
            raise VectorIndexError("open", _safe(exc)) from None
        self._check_or_write_meta(model_id, dimension)

    # -- lifecycle -------------------------------------------------------
    @staticmethod
    def _config(dimension: int) -> EdgeConfig:
        return EdgeConfig(
            vectors={DENSE_VECTOR: EdgeVectorParams(size=dimension, distance=Distance.Cosine)},
            sparse_vectors={SPARSE_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf)},
        )

    def _create_indexes(self) -> None:
        for key in INDEXED_KEYWORDS:
            self._shard.update(UpdateOperation.create_field_index(key.value, PayloadSchemaType.Keyword))
        for key in INDEXED_BOOLS:
            self._shard.update(UpdateOperation.create_field_index(key.value, PayloadSchemaType.Bool))

    def _check_or_write_meta(self, model_id: str, dimension: int) -> None:
        meta = self.read_meta()
        if meta is None:
            self._shard.update(
                UpdateOperation.upsert_points(
                    [Point(id=META_POINT_ID, vector={}, payload=meta_payload(model_id, dimension))]
                )
            )
            self._shard.flush()
            return
        try:
            check_collection_meta(self.name, meta, model_id, dimension)
        except VectorIndexError:
            self.close()
            raise

    def read_meta(self) -> dict[str, Any] | None:
        records = self._shard.retrieve([META_POINT_ID], with_payload=True, with_vector=False)
        return dict(records[0].payload or {}) if records else None

    def update_meta(self, fields: Mapping[str, Any]) -> None:
        self._shard.update(UpdateOperation.set_payload([META_POINT_ID], dict(fields)))
        self._shard.flush()

    def set_cipher(self, cipher: TextCipher | None) -> None:
        """Chunk text encryption at rest; set after opening, since the cipher keeps its keys in the meta point."""
        self._cipher = cipher

    def flush(self) -> None:
        self._shard.flush()

    def optimize(self) -> bool:
        """Build the HNSW and payload-indexed segments; blocks until done (minutes at 100k chunks).

        Edge never optimizes on its own: without this, every search is an exact scan of the
        filtered points (docs/benchmarks.md, "Search latency": hybrid p50 11.5 ms plain
        against 4.8 ms optimized at 100k). Call it after a bulk ingest.
        """
        try:
            return bool(self._shard.optimize())
        except Exception as exc:
            raise VectorIndexError("optimize", _safe(exc)) from None

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._shard.flush()
                self._shard.close()

    def ready(self) -> bool:
        return not self._closed

    # -- VectorIndex -----------------------------------------------------
    def upsert(self, chunks: Sequence[IndexedChunk]) -> None:
        if not chunks:
            return
        points = [
            Point(
                id=uuid.UUID(item.chunk.id),
                vector={DENSE_VECTOR: list(item.dense), SPARSE_VECTOR: self._bm25.embed_document(item.chunk.text)},
                payload=chunk_payload(item, self._cipher),
            )
            for item in chunks
        ]
        self._update(UpdateOperation.upsert_points(points), "upsert")

    def search(
        self,
        *,
        dense: Sequence[float] | None,
        text: str | None,
        acl: AclFilter,
        limit: int,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]:
        if acl.allows_nothing or limit <= 0:
            return []  # fail closed: no groups, no query at all
        flt = acl_chunk_filter(acl)
        fetch = max(limit, self._fusion.prefetch_limit)
        dense_q = Query.Nearest(list(dense), using=DENSE_VECTOR) if dense is not None else None
        sparse_q = Query.Nearest(self._bm25.embed_query(text), using=SPARSE_VECTOR) if text else None
        if mode == "hybrid" and (dense_q is None or sparse_q is None):
            mode = "dense" if dense_q is not None else "sparse"
        if mode == "dense":
            if dense_q is None:
                raise VectorIndexError("search", "dense mode needs a query vector")
            return self._hits(
                self._query([QueryRequest(limit=limit, query=dense_q, filter=flt, with_payload=True)])[0], "dense"
            )
        if mode == "sparse":
            if sparse_q is None:
                return []
            return self._hits(
                self._query([QueryRequest(limit=limit, query=sparse_q, filter=flt, with_payload=True)])[0], None
            )
        if self._fusion.method == "convex" and dense is not None and dense_q is not None and sparse_q is not None:
            return self._convex(list(dense), dense_q, sparse_q, flt, limit=limit, fetch=fetch)
        fused = QueryRequest(
            limit=limit,
            prefetches=[
                Prefetch(limit=fetch, query=dense_q, filter=flt),
                Prefetch(limit=fetch, query=sparse_q, filter=flt),
            ],
            query=self._fusion.edge_fusion(),
            filter=flt,
            with_payload=True,
            with_vector=[DENSE_VECTOR],
        )
        points = self._query([fused])[0]
        stored = {str(p.id): (p.vector or {}).get(DENSE_VECTOR) for p in points}  # type: ignore[union-attr]
        return self._hits(points, cosine_scores(list(dense or ()), stored))

    def _convex(
        self, dense: list[float], dense_q: Query, sparse_q: Query, flt: Filter, *, limit: int, fetch: int
    ) -> list[Hit]:
        """Min-max convex fusion, client-side (Qdrant has none); both branches ACL-filtered in the engine."""
        dense_points, sparse_points = self._query(
            [
                QueryRequest(limit=fetch, query=dense_q, filter=flt, with_payload=True, with_vector=False),
                QueryRequest(limit=fetch, query=sparse_q, filter=flt, with_payload=True, with_vector=[DENSE_VECTOR]),
            ]
        )
        points = {str(p.id): p for p in (*sparse_points, *dense_points)}
        dense_scores = {str(p.id): float(p.score) for p in dense_points}
        fused = fuse_convex(
            dense_scores, {str(p.id): float(p.score) for p in sparse_points}, self._fusion.dense_share, limit
        )
        # Hits found by BM25 alone still get their cosine, for the relevance threshold.
        missing = {pid: (points[pid].vector or {}).get(DENSE_VECTOR) for pid, _ in fused if pid not in dense_scores}  # type: ignore[union-attr]
        dense_scores.update(cosine_scores(dense, missing) if missing else {})
        hits = [
            Hit(
                chunk=chunk_from_payload(pid, points[pid].payload or {}, self._cipher),
                score=score,
                dense_score=dense_scores.get(pid),
            )
            for pid, score in fused
        ]
        hits.sort(key=lambda h: sort_hits_key(h.score, h.chunk.id))
        return hits

    def _query(self, requests: list[QueryRequest]) -> list[list[ScoredPoint]]:
        try:
            return self._shard.query_batch(QueryBatchRequest(requests))
        except Exception as exc:
            raise VectorIndexError("search", _safe(exc)) from None

    def _hits(self, points: list[ScoredPoint], dense: dict[str, float] | str | None) -> list[Hit]:
        """``dense``: "dense" when the scores are cosine, a lookup for fused results, None for sparse."""
        hits = []
        for p in points:
            pid = str(p.id)
            if dense == "dense":
                ds: float | None = float(p.score)
            elif isinstance(dense, dict):
                ds = dense.get(pid)
            else:
                ds = None
            hits.append(
                Hit(chunk=chunk_from_payload(pid, p.payload or {}, self._cipher), score=float(p.score), dense_score=ds)
            )
        hits.sort(key=lambda h: sort_hits_key(h.score, h.chunk.id))
        return hits

    def delete_chunks(self, doc_id: str, *, keep_ids: Sequence[str] = ()) -> int:
        flt = Filter(
            must=[_any_chunk(), _doc(doc_id)],
            must_not=[HasIdCondition({uuid.UUID(i) for i in keep_ids})] if keep_ids else None,
        )
        n = self._shard.count(CountRequest(filter=flt, exact=True))
        if n:
            self._update(UpdateOperation.delete_points_by_filter(flt), "delete")
        return n

    def count_chunks(self, doc_id: str | None = None) -> int:
        must: list[Any] = [_any_chunk()]
        if doc_id:
            must.append(_doc(doc_id))
        return self._shard.count(CountRequest(filter=Filter(must=must), exact=True))

    def chunk_ids(self, doc_id: str) -> list[str]:
        return [str(r.id) for r in self._scroll(Filter(must=[_any_chunk(), _doc(doc_id)]), payload=False)]

    # -- DocumentCatalog -------------------------------------------------
    def get_document(self, doc_id: str) -> DocumentRecord | None:
        recs = self._shard.retrieve([uuid.UUID(document_point_id(doc_id))], with_payload=True, with_vector=False)
        return document_from_payload(recs[0].payload or {}) if recs else None

    def put_document(self, record: DocumentRecord) -> None:
        self.put_documents([record])

    def put_documents(self, records: Sequence[DocumentRecord]) -> None:
        if not records:
            return
        points = [
            Point(id=uuid.UUID(document_point_id(r.doc_id)), vector={}, payload=document_payload(r)) for r in records
        ]
        self._update(UpdateOperation.upsert_points(points), "put document")

    def delete_document(self, doc_id: str) -> int:
        n = self.delete_chunks(doc_id)
        self._update(UpdateOperation.delete_points([uuid.UUID(document_point_id(doc_id))]), "delete document")
        return n

    def list_documents(self, *, acl: AclFilter | None = None, root: str | None = None) -> list[DocumentRecord]:
        must: list[Any] = [_kind(Kind.DOCUMENT)]
        if acl is not None:
            if acl.allows_nothing:
                return []
            must.append(FieldCondition(key=Key.ACL_GROUPS, match=MatchAny(any=list(acl.labels))))
        if root is not None:
            must.append(FieldCondition(key=Key.ROOT, match=MatchValue(root)))
        docs = [document_from_payload(r.payload or {}) for r in self._scroll(Filter(must=must), payload=True)]
        return sorted(docs, key=lambda d: d.doc_id)

    def set_document_acl(self, doc_id: str, acl_groups: Sequence[str]) -> None:
        # Payload-only update: vectors stay untouched, so no re-embedding.
        payload = {Key.ACL_GROUPS.value: list(acl_groups)}
        self._update(UpdateOperation.set_payload_by_filter(Filter(must=[_doc(doc_id)]), payload), "set acl")

    # -- helpers ---------------------------------------------------------
    def _scroll(self, flt: Filter, *, payload: bool) -> list[Any]:
        out: list[Any] = []
        offset: Any = None
        while True:
            recs, offset = self._shard.scroll(
                ScrollRequest(offset=offset, limit=_SCROLL_PAGE, filter=flt, with_payload=payload, with_vector=False)
            )
            out.extend(recs)
            if offset is None:
                return out

    def _update(self, op: UpdateOperation, name: str) -> None:
        try:
            self._shard.update(op)
        except Exception as exc:
            raise VectorIndexError(name, _safe(exc)) from None


def _safe(exc: Exception) -> str:
    """Engine messages name vectors, shards and paths; keep the first line, bounded."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
