"""Translator for the embedded engine: a qdrant-edge ``EdgeShard``, Qdrant's own engine in-process.

The shard lives under ``<data_dir>/collections/<name>`` and survives restarts (the WAL
replays after a crash). One process may open a shard at a time; a second open fails with
a clear error instead of corrupting it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qdrant_edge import (
    CountRequest,
    Direction,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    Fusion,
    HasIdCondition,
    HnswIndexConfig,
    IntegerIndexParams,
    KeywordIndexParams,
    MatchAny,
    MatchValue,
    Memory,
    Modifier,
    OrderBy,
    Point,
    Prefetch,
    QuantizationSearchParams,
    Query,
    QueryBatchRequest,
    QueryRequest,
    ScalarQuantizationConfig,
    ScalarType,
    ScrollRequest,
    SearchParams,
    SparseVector,
    TurboQuantBitSize,
    TurboQuantQuantizationConfig,
    UpdateOperation,
)

from docquery.core.collection import DENSE_VECTOR, SPARSE_VECTOR
from docquery.core.errors import VectorIndexError
from docquery.index import engine as e
from docquery.index.tuning import IndexTuning

log = logging.getLogger(__name__)


@contextmanager
def _guard(operation: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # qdrant_edge raises plain Exception; its messages name shards and paths
        raise VectorIndexError(operation, e.first_line(exc)) from None


def _condition(m: e.Match) -> FieldCondition:
    match = MatchValue(m.values[0]) if len(m.values) == 1 else MatchAny(any=list(m.values))
    return FieldCondition(key=m.key, match=match)


def _filter(where: e.Where) -> Filter:
    except_ids: list[Any] | None = (
        [HasIdCondition({uuid.UUID(i) for i in where.except_ids})] if where.except_ids else None
    )
    return Filter(
        must=[_condition(m) for m in where.must] or None,
        should=[_condition(m) for m in where.any_of] or None,
        must_not=except_ids,
    )


def _vector(v: list[float] | e.SparseLike) -> Any:
    if isinstance(v, list | SparseVector):
        return v  # BM25's own sparse vector goes in as it is: reading it out and back costs a copy each way
    return SparseVector(list(v.indices), list(v.values))


def _nearest(n: e.Nearest) -> Query:
    return Query.Nearest(_vector(n.vector), using=n.using)


def _fusion(f: e.RankFusion) -> Fusion:
    if f.method == "dbsf":
        dbsf: Fusion = Fusion.Dbsf()  # type: ignore[assignment]  # the stub types the variant as its class
        return dbsf
    rrf: Fusion = Fusion.Rrf(k=f.rrf_k, weights=list(f.weights))  # type: ignore[assignment]
    return rrf


def edge_config(dimension: int, tuning: IndexTuning) -> EdgeConfig:
    """A new shard's config: HNSW, quantized vectors in RAM, originals and payload on disk, optimizer bounds."""
    quantization: ScalarQuantizationConfig | TurboQuantQuantizationConfig | None = None
    if tuning.quantization == "int8":
        quantization = ScalarQuantizationConfig(type=ScalarType.Int8, quantile=tuning.quantile, memory=Memory.Pinned)
    elif tuning.quantization == "turbo4":
        quantization = TurboQuantQuantizationConfig(bits=TurboQuantBitSize.Bits4, memory=Memory.Pinned)
    originals = Memory.Cold if tuning.vectors_on_disk else Memory.Cached
    return EdgeConfig(
        vectors={DENSE_VECTOR: EdgeVectorParams(size=dimension, distance=Distance.Cosine, memory=originals)},
        # The BM25 inverted index stays in RAM: every hybrid query walks its posting lists.
        sparse_vectors={SPARSE_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf, memory=Memory.Pinned)},
        # Payloads (chunk text) are read only for the hits returned, so they stay on disk.
        payload_memory=Memory.Cold,
        hnsw_config=HnswIndexConfig(
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=tuning.full_scan_threshold_kb
        ),
        quantization_config=quantization,
        optimizers=EdgeOptimizersConfig(
            indexing_threshold=tuning.indexing_threshold_kb, max_segment_size=tuning.max_segment_size_kb
        ),
    )


def search_params(tuning: IndexTuning, *, exact: bool = False, oversampling: float | None = None) -> SearchParams:
    """A dense search's parameters; ``oversampling`` None: the tuning's own."""
    if exact:
        return SearchParams(exact=True, quantization=QuantizationSearchParams(ignore=True))
    if not tuning.quantized:
        return SearchParams(hnsw_ef=tuning.hnsw_ef)
    factor = tuning.oversampling if oversampling is None else oversampling
    return SearchParams(
        hnsw_ef=tuning.hnsw_ef, quantization=QuantizationSearchParams(rescore=True, oversampling=factor)
    )


def _params(n: e.Nearest, s: e.Search, tuning: IndexTuning) -> SearchParams | None:
    """Dense queries get the HNSW/quantization parameters; sparse ones are exact already."""
    if n.using != DENSE_VECTOR:
        return None
    depth, ranked = s.dense_depth()
    return search_params(tuning, exact=s.exact, oversampling=tuning.rescoring(depth=depth, wanted=ranked))


def _request(s: e.Search, tuning: IndexTuning) -> QueryRequest:
    flt = _filter(s.where)
    with_vector = [DENSE_VECTOR] if s.with_dense else False
    if s.fusion is not None:
        prefetch = [
            Prefetch(limit=s.prefetch_limit, query=_nearest(n), filter=flt, params=_params(n, s, tuning))
            for n in s.prefetch
        ]
        # The ACL filter is on each prefetch, and only there: the engine ANDs a fused query's
        # own filter into every prefetch, so repeating it checked each condition twice per candidate.
        return QueryRequest(
            limit=s.limit, prefetches=prefetch, query=_fusion(s.fusion), with_payload=True, with_vector=with_vector
        )
    assert s.nearest is not None  # noqa: S101 - a Search has a query or a fusion
    return QueryRequest(
        limit=s.limit,
        query=_nearest(s.nearest),
        filter=flt,
        with_payload=True,
        with_vector=with_vector,
        params=_params(s.nearest, s, tuning),
    )


def _found(p: Any) -> e.Found:
    vector = p.vector  # each read of a point's attribute converts it to Python again: 384 floats here
    dense = vector.get(DENSE_VECTOR) if isinstance(vector, dict) else None
    return e.Found(id=str(p.id), payload=p.payload or {}, score=float(getattr(p, "score", 0.0)), dense=dense)


class EdgeEngine:
    """One collection in an embedded Edge shard at ``path``."""

    def __init__(self, path: Path, *, dimension: int, tuning: IndexTuning | None = None) -> None:
        # Held for every call into the shard, so the reload after a seal never swaps it under a reader.
        self._lock = threading.RLock()
        self._closed = False
        self._path = path
        self._tuning = tuning or IndexTuning()
        # The write path fills one appendable segment, and Edge starts no optimizer on its own:
        # upsert seals it (optimize) once it holds a full segment of dense vectors, as a server's
        # optimizers would, so segments stay within max_segment_size_kb (tuning.py).
        self._seal_after = max(1, self._tuning.seal_points(dimension))
        self._unsealed = 0  # dense vectors upserted since the last optimize by this process
        self.seal_s = 0.0  # seconds spent sealing, for the ingest log and benchmarks
        with _guard("open"):
            self.created = not (path / "edge_config.json").exists()
            if self.created:
                path.mkdir(parents=True, exist_ok=True)
                self._shard = EdgeShard.create(str(path), edge_config(dimension, self._tuning))
                self.create_indexes()
            else:
                # No config: an existing shard keeps the structures it was built with, since a
                # changed one would make the next optimize() rebuild every segment.
                self._shard = EdgeShard.load(str(path))

    async def query(self, searches: Sequence[e.Search]) -> list[list[e.Found]]:
        # Called on the caller's thread, without a hand-off: the engine holds the GIL for the
        # whole query, so a worker thread would not free the event loop (test_query_placement.py).
        with self._use("search") as shard:
            requests = [_request(s, self._tuning) for s in searches]
            batches = shard.query_batch(QueryBatchRequest(requests))
        return [[_found(p) for p in points] for points in batches]

    def upsert(self, points: Sequence[e.Point]) -> None:
        # In pieces that end where the appendable segment is full, so no segment passes the bound.
        done = 0
        while done < len(points):
            piece = points[done : done + self._seal_after - self._unsealed]
            done += len(piece)
            edge_points = [Point(id=uuid.UUID(p.id), vector=p.vectors(_vector), payload=dict(p.payload)) for p in piece]
            self._update("upsert", UpdateOperation.upsert_points(edge_points))
            self._unsealed += sum(1 for p in piece if p.dense is not None)
            if self._unsealed >= self._seal_after:
                self._seal()

    def _seal(self) -> None:
        """Index the full appendable segment now; the engine opens a new one for the next writes.

        Then the shard is closed and loaded again, since the write goes on. An open shard keeps every
        segment an optimize replaced, in memory and on disk, until it closes: without the reload each
        seal of a long write left its old appendable segment behind, and a million-chunk write outgrew
        a 4 GB node that way (docs/design.md). A reload takes seconds even at that size. A plain
        ``optimize()`` does not reload: its callers close the shard next (the end of an ingest).
        """
        log.info("index: sealing a full segment of %d chunks", self._unsealed)
        t0 = time.monotonic()
        with self._lock:
            self.optimize()
            self._reopen()
        took = time.monotonic() - t0
        self.seal_s += took
        log.info("index: segment sealed in %.1fs", took)

    def _reopen(self) -> None:
        with self._use("reopen") as shard:
            shard.close()  # flushes first
            self._closed = True  # until the load succeeds: a failed one leaves no half-open shard behind
            self._shard = EdgeShard.load(str(self._path))
            self._closed = False

    @contextmanager
    def _use(self, operation: str) -> Iterator[EdgeShard]:
        """The open shard, under the lock, with the engine's errors made ``VectorIndexError``."""
        with self._lock, _guard(operation):
            if self._closed:
                raise RuntimeError("the index is closed")
            yield self._shard

    def delete(self, *, ids: Sequence[str] = (), where: e.Where | None = None) -> None:
        if where is not None:
            self._update("delete", UpdateOperation.delete_points_by_filter(_filter(where)))
        if ids:
            self._update("delete", UpdateOperation.delete_points([uuid.UUID(i) for i in ids]))

    def set_payload(self, payload: Mapping[str, Any], *, ids: Sequence[str] = (), where: e.Where | None = None) -> None:
        if where is not None:
            self._update("set payload", UpdateOperation.set_payload_by_filter(_filter(where), dict(payload)))
        if ids:
            self._update("set payload", UpdateOperation.set_payload([uuid.UUID(i) for i in ids], dict(payload)))

    def retrieve(self, ids: Sequence[str]) -> list[e.Found]:
        with self._use("retrieve") as shard:
            records = shard.retrieve([uuid.UUID(i) for i in ids], with_payload=True, with_vector=False)
        return [_found(r) for r in records]

    def scroll(self, where: e.Where, *, with_payload: bool, offset: Any, limit: int) -> tuple[list[e.Found], Any]:
        request = ScrollRequest(
            offset=offset, limit=limit, filter=_filter(where), with_payload=with_payload, with_vector=False
        )
        with self._use("scroll") as shard:
            records, after = shard.scroll(request)
        return [_found(r) for r in records], after

    def scroll_ordered(self, where: e.Where, *, key: str, start_from: int | None, limit: int) -> list[e.Found]:
        order = OrderBy(key, Direction.Asc, start_from)
        where_ = _filter(where)
        request = ScrollRequest(limit=limit, filter=where_, with_payload=True, with_vector=False, order_by=order)
        with self._use("scroll") as shard:
            records, _ = shard.scroll(request)
        return [_found(r) for r in records]

    def count(self, where: e.Where) -> int:
        with self._use("count") as shard:
            return int(shard.count(CountRequest(filter=_filter(where), exact=True)))

    def create_indexes(self) -> None:
        for index in IndexTuning.payload_keys():
            params = KeywordIndexParams(enable_hnsw=index.hnsw, is_tenant=index.tenant)
            self._update("create index", UpdateOperation.create_field_index(index.key.value, params))

    def create_order_index(self, key: str) -> None:
        params = IntegerIndexParams(lookup=False, range=True)
        self._update("create index", UpdateOperation.create_field_index(key, params))

    def create_keyword_index(self, key: str) -> None:
        params = KeywordIndexParams(enable_hnsw=False, is_tenant=False)
        self._update("create index", UpdateOperation.create_field_index(key, params))

    def flush(self) -> None:
        with self._use("flush") as shard:
            shard.flush()

    def optimize(self) -> bool:
        """Run the optimizers their thresholds call for (HNSW, quantization, merges, vacuum); blocks until done.

        Edge never optimizes on its own: without this, every segment is searched by exact scan.
        Segments under the indexing threshold are left as they are, so this is cheap when little changed.
        """
        with self._use("optimize") as shard:
            rebuilt = bool(shard.optimize())
        self._unsealed = 0
        return rebuilt

    def stats(self) -> e.Stats:
        with self._use("info") as shard:
            info = shard.info()
        return e.Stats(
            points=int(info.points_count),
            indexed_vectors=int(info.indexed_vectors_count),
            segments=info.segments_count,
            seal_s=self.seal_s,
        )

    def ready(self) -> bool:
        return not self._closed

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._shard.flush()
                self._shard.close()

    async def aclose(self) -> None:
        """Nothing belongs to an event loop here."""

    def _update(self, operation: str, op: UpdateOperation) -> None:
        with self._use(operation) as shard:
            shard.update(op)
