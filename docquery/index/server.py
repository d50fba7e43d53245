"""Translator for a Qdrant server through qdrant-client (sync client for writes, async for queries).

``url=":memory:"`` runs qdrant-client's local mode, the stand-in for the server API in
tests: exact search, no payload indexes, weighted RRF, DBSF and the IDF modifier with the
server's formulas.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from qdrant_client import AsyncQdrantClient, QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from docquery.core.collection import DENSE_VECTOR, SPARSE_VECTOR
from docquery.core.errors import CollectionMissingError, DocQueryError, VectorIndexError, VectorIndexUnreachable
from docquery.core.ports import KeyProvider
from docquery.index import engine as e
from docquery.index.tuning import IndexTuning

LOCAL_MEMORY = ":memory:"


class _NoKeyError(DocQueryError):
    """The key provider has no key now (its file was removed): no request is sent."""


def _safe(exc: Exception) -> str:
    """Status and error class only: a server response body may echo payload text back."""
    if isinstance(exc, UnexpectedResponse):
        return f"status {exc.status_code}"
    if isinstance(exc, ResponseHandlingException):
        if isinstance(exc.source, _NoKeyError):
            return "no Qdrant API key (the secret qdrant-api-key is missing)"
        return "no response from the server"
    return type(exc).__name__


@contextmanager
def _guard(operation: str, lock: threading.RLock | None) -> Iterator[None]:
    try:
        if lock is None:
            yield
        else:
            with lock:
                yield
    except VectorIndexError:
        raise
    except ResponseHandlingException as exc:
        unreachable = not isinstance(exc.source, _NoKeyError)
        raise (VectorIndexUnreachable if unreachable else VectorIndexError)(operation, _safe(exc)) from None
    except Exception as exc:
        raise VectorIndexError(operation, _safe(exc)) from None


def _condition(m: e.Match) -> models.Condition:
    return models.FieldCondition(
        key=m.key,
        match=models.MatchValue(value=m.values[0]) if len(m.values) == 1 else models.MatchAny(any=list(m.values)),
    )


def _filter(where: e.Where) -> models.Filter:
    except_ids: list[models.Condition] | None = (
        [models.HasIdCondition(has_id=[str(uuid.UUID(i)) for i in where.except_ids])] if where.except_ids else None
    )
    return models.Filter(
        must=[_condition(m) for m in where.must] or None,
        should=[_condition(m) for m in where.any_of] or None,
        must_not=except_ids,
    )


def _vector(v: list[float] | e.SparseLike) -> list[float] | models.SparseVector:
    return v if isinstance(v, list) else models.SparseVector(indices=list(v.indices), values=list(v.values))


def _fusion(f: e.RankFusion) -> models.RrfQuery | models.FusionQuery:
    if f.method == "dbsf":
        return models.FusionQuery(fusion=models.Fusion.DBSF)
    return models.RrfQuery(rrf=models.Rrf(k=f.rrf_k, weights=list(f.weights)))


def collection_config(tuning: IndexTuning) -> dict[str, Any]:
    """``create_collection`` arguments for the search structures: the embedded engine's, on the server."""
    quantization: models.ScalarQuantization | models.TurboQuantization | None = None
    if tuning.quantization == "int8":
        scalar = models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=tuning.quantile, memory=models.Memory.PINNED
        )
        quantization = models.ScalarQuantization(scalar=scalar)
    elif tuning.quantization == "turbo4":
        turbo = models.TurboQuantQuantizationConfig(bits=models.TurboQuantBitSize.BITS4, memory=models.Memory.PINNED)
        quantization = models.TurboQuantization(turbo=turbo)
    return {
        "hnsw_config": models.HnswConfigDiff(
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=tuning.full_scan_threshold_kb
        ),
        "quantization_config": quantization,
        "optimizers_config": models.OptimizersConfigDiff(
            indexing_threshold=tuning.indexing_threshold_kb, max_segment_size=tuning.max_segment_size_kb
        ),
    }


def search_params(
    tuning: IndexTuning, *, exact: bool = False, oversampling: float | None = None
) -> models.SearchParams:
    """A dense search's parameters; ``oversampling`` None: the tuning's own."""
    if exact:
        return models.SearchParams(exact=True, quantization=models.QuantizationSearchParams(ignore=True))
    factor = tuning.oversampling if oversampling is None else oversampling
    quantization = models.QuantizationSearchParams(rescore=True, oversampling=factor) if tuning.quantized else None
    return models.SearchParams(hnsw_ef=tuning.hnsw_ef, quantization=quantization)


def _params(n: e.Nearest, s: e.Search, tuning: IndexTuning | None) -> models.SearchParams | None:
    """Dense queries get the HNSW/quantization parameters; sparse ones are exact already."""
    if tuning is None or n.using != DENSE_VECTOR:
        return None
    depth, ranked = s.dense_depth()
    return search_params(tuning, exact=s.exact, oversampling=tuning.rescoring(depth=depth, wanted=ranked))


def _request(s: e.Search, tuning: IndexTuning | None) -> models.QueryRequest:
    """``tuning`` None: no search parameters (local mode is exact and warns about any)."""
    flt = _filter(s.where)
    with_vector: list[str] | bool = [DENSE_VECTOR] if s.with_dense else False
    if s.fusion is not None:
        prefetch = [
            models.Prefetch(
                query=_vector(n.vector), using=n.using, filter=flt, limit=s.prefetch_limit, params=_params(n, s, tuning)
            )
            for n in s.prefetch
        ]
        return models.QueryRequest(
            prefetch=prefetch,
            query=_fusion(s.fusion),
            filter=flt,
            limit=s.limit,
            with_payload=True,
            with_vector=with_vector,
        )
    assert s.nearest is not None  # noqa: S101 - a Search has a query or a fusion
    return models.QueryRequest(
        query=_vector(s.nearest.vector),
        using=s.nearest.using,
        filter=flt,
        limit=s.limit,
        with_payload=True,
        with_vector=with_vector,
        params=_params(s.nearest, s, tuning),
    )


def _found(p: models.ScoredPoint | models.Record) -> e.Found:
    stored = p.vector.get(DENSE_VECTOR) if isinstance(p.vector, dict) else None
    dense = cast("list[float]", stored) if isinstance(stored, list) else None  # a named dense vector
    score = p.score if isinstance(p, models.ScoredPoint) else 0.0
    return e.Found(id=str(p.id), payload=p.payload or {}, score=float(score), dense=dense)


def bearer(api_key: KeyProvider) -> Callable[[], str]:
    """The token callback qdrant-client calls before every request: the key as it is now.

    The server takes ``Authorization: Bearer <api key>`` as it takes the ``api-key`` header
    (qdrant/qdrant ``AuthKeys::extract_key``). A key that has gone away fails the call before
    anything is sent, rather than sending a stale key or none.
    """

    def token() -> str:
        key = api_key()
        if key is None:
            raise _NoKeyError
        return key.get_secret_value()

    return token


class ServerEngine:
    """One collection on a Qdrant server (or in qdrant-client's local mode)."""

    def __init__(
        self,
        *,
        url: str,
        name: str,
        dimension: int,
        api_key: KeyProvider | None = None,
        timeout_s: float = 10.0,
        shard_number: int = 1,
        replication_factor: int = 1,
        write_consistency_factor: int = 1,
        client: QdrantClient | None = None,
        tuning: IndexTuning | None = None,
        create: bool = True,
    ) -> None:
        """``client``: a ready client to use instead of connecting to ``url`` (tests share one
        local-mode client between two opens to exercise reopening); ``close`` leaves it open.
        ``tuning``: the search structures of a collection this open creates, and the search parameters."""
        self.name = name
        self._tuning = tuning or IndexTuning()
        self._owns_client = client is None
        self._closed = False
        local = url == LOCAL_MEMORY or (
            client is not None and (client.init_options.get("location") or client.init_options.get("path")) is not None
        )
        # Local mode keeps plain Python structures without locking; the server client is thread-safe.
        self._lock = threading.RLock() if local else None
        with _guard("open", None):
            if client is not None:
                self._client = client
            elif local:
                self._client = QdrantClient(location=LOCAL_MEMORY)
            else:
                self._client = QdrantClient(url=url, timeout=max(1, round(timeout_s)), **_auth(api_key))
            self._async_options: dict[str, Any] = (
                {"location": LOCAL_MEMORY}
                if local
                else {"url": url, "timeout": max(1, round(timeout_s)), **_auth(api_key)}
            )
            self._aclient: AsyncQdrantClient | None = None
            self._aloop: asyncio.AbstractEventLoop | None = None
            if not create and not self._client.collection_exists(name):
                if self._owns_client:
                    self._client.close()
                raise CollectionMissingError(
                    "open",
                    f"collection {name!r} does not exist on the Qdrant server yet: run the ingest first, which creates "
                    "it (the query side never does: its key may only read)",
                )
            self.created = create and self._create_if_absent(
                dimension, shard_number, replication_factor, write_consistency_factor
            )

    def _async_client(self) -> AsyncQdrantClient:
        """The async client for the running loop: its connection pool belongs to that loop."""
        loop = asyncio.get_running_loop()
        if self._aclient is None or (self._aloop is not loop and self._lock is None):
            self._aclient, self._aloop = AsyncQdrantClient(**self._async_options), loop
            if self._lock is not None:
                # The stand-in: an async local-mode client over the same in-memory collections,
                # as two clients of one server see the same data.
                local: Any = self._aclient._client
                local.collections = self._client._client.collections  # type: ignore[attr-defined]
        return self._aclient

    def _create_if_absent(self, dimension: int, shards: int, replicas: int, write_consistency: int) -> bool:
        """Create the collection unless it exists; True when this call created it.

        Concurrent ingest shards may all find it missing: the losers' "already exists" is
        not an error, and they go on to verify the meta point the winner writes.
        """
        if self._client.collection_exists(self.name):
            return False
        try:
            self._client.create_collection(
                self.name,
                vectors_config={
                    DENSE_VECTOR: models.VectorParams(
                        size=dimension, distance=models.Distance.COSINE, on_disk=self._tuning.vectors_on_disk
                    )
                },
                # IDF is applied at query time, so the stored BM25 weights are Edge's and adding
                # documents never requires re-weighting old ones.
                sparse_vectors_config={SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                shard_number=shards,
                replication_factor=replicas,
                write_consistency_factor=write_consistency,
                **collection_config(self._tuning),
            )
        except Exception:
            if self._client.collection_exists(self.name):
                return False  # another shard created it first
            raise
        self.create_indexes()
        return True

    async def query(self, searches: Sequence[e.Search]) -> list[list[e.Found]]:
        requests = [_request(s, None if self._lock is not None else self._tuning) for s in searches]
        with _guard("search", self._lock):
            responses = await self._async_client().query_batch_points(self.name, requests)
        return [[_found(p) for p in r.points] for r in responses]

    def upsert(self, points: Sequence[e.Point]) -> None:
        structs = [models.PointStruct(id=p.id, vector=p.vectors(_vector), payload=dict(p.payload)) for p in points]
        with _guard("upsert", self._lock):
            self._client.upsert(self.name, structs, wait=True)

    def delete(self, *, ids: Sequence[str] = (), where: e.Where | None = None) -> None:
        with _guard("delete", self._lock):
            if where is not None:
                self._client.delete(self.name, models.FilterSelector(filter=_filter(where)), wait=True)
            if ids:
                self._client.delete(self.name, models.PointIdsList(points=list(ids)), wait=True)

    def set_payload(self, payload: Mapping[str, Any], *, ids: Sequence[str] = (), where: e.Where | None = None) -> None:
        with _guard("set payload", self._lock):
            if where is not None:
                self._client.set_payload(self.name, dict(payload), points=_filter(where), wait=True)
            if ids:
                self._client.set_payload(self.name, dict(payload), points=list(ids), wait=True)

    def retrieve(self, ids: Sequence[str]) -> list[e.Found]:
        with _guard("retrieve", self._lock):
            records = self._client.retrieve(self.name, list(ids), with_payload=True, with_vectors=False)
        return [_found(r) for r in records]

    def scroll(self, where: e.Where, *, with_payload: bool, offset: Any, limit: int) -> tuple[list[e.Found], Any]:
        with _guard("scroll", self._lock):
            records, after = self._client.scroll(
                self.name, scroll_filter=_filter(where), limit=limit, offset=offset, with_payload=with_payload
            )
        return [_found(r) for r in records], after

    def scroll_ordered(self, where: e.Where, *, key: str, start_from: int | None, limit: int) -> list[e.Found]:
        order = models.OrderBy(key=key, direction=models.Direction.ASC, start_from=start_from)
        with _guard("scroll", self._lock):
            records, _ = self._client.scroll(
                self.name, scroll_filter=_filter(where), limit=limit, order_by=order, with_payload=True
            )
        return [_found(r) for r in records]

    def count(self, where: e.Where) -> int:
        with _guard("count", self._lock):
            return int(self._client.count(self.name, count_filter=_filter(where), exact=True).count)

    def create_indexes(self) -> None:
        with _guard("create index", self._lock), warnings.catch_warnings():
            # Local mode warns that payload indexes do nothing there (it scans); the server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            for index in IndexTuning.payload_keys():
                schema = models.KeywordIndexParams(
                    type=models.KeywordIndexType.KEYWORD, enable_hnsw=index.hnsw, is_tenant=index.tenant
                )
                self._client.create_payload_index(self.name, index.key.value, schema, wait=True)

    def create_order_index(self, key: str) -> None:
        with _guard("create index", self._lock), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            schema = models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=False, range=True)
            self._client.create_payload_index(self.name, key, schema, wait=True)

    def create_keyword_index(self, key: str) -> None:
        with _guard("create index", self._lock), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            schema = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, enable_hnsw=False)
            self._client.create_payload_index(self.name, key, schema, wait=True)

    def flush(self) -> None:
        """Writes are acknowledged with ``wait=True`` and the server keeps a WAL: nothing to flush."""

    def optimize(self) -> bool:
        """The server's optimizers run on their own (local mode scans): nothing to do."""
        return False

    def stats(self) -> e.Stats:
        with _guard("info", self._lock):
            info = self._client.get_collection(self.name)
        return e.Stats(
            points=info.points_count or 0, indexed_vectors=info.indexed_vectors_count or 0, segments=info.segments_count
        )

    def ready(self) -> bool:
        if self._closed:
            return False
        try:
            with _guard("ready", self._lock):
                return bool(self._client.collection_exists(self.name))
        except VectorIndexError:
            return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._client.close()

    async def aclose(self) -> None:
        """Release the async client's connection pool; call it on the loop that used it.

        The engine stays usable: the next query opens a client on its own loop.
        """
        aclient, self._aclient = self._aclient, None
        if aclient is not None and self._lock is None:
            await aclient.close()


def _auth(api_key: KeyProvider | None) -> dict[str, Any]:
    # No version probe: it runs in a background thread that fails noisily when the server is
    # down; the collection_exists call fails cleanly instead.
    options: dict[str, Any] = {"check_compatibility": False}
    if api_key is not None and api_key() is not None:
        options["auth_token_provider"] = bearer(api_key)
    return options
