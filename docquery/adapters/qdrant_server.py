"""Server vector index on qdrant-client: the same collection layout and behaviour as ``EdgeIndex``.

Same payloads (``payload.py``), same sparse vectors (``qdrant_edge.Bm25``
computed client-side, stored with the server's IDF modifier), same fusion
(``FusionParams``), same ACL filter inside every prefetch and the fused query.
``tests/integration/test_index_contract.py`` runs one suite on both backends and
checks that they return the same hits for the same data.

``url=":memory:"`` runs qdrant-client's local mode, the stand-in for the server
API in tests. Local mode does exact search and keeps no payload indexes; it
implements weighted RRF, DBSF and the IDF modifier with the server's formulas.
"""

from __future__ import annotations

import threading
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import SecretStr
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from qdrant_edge import Bm25

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
_META_ID = str(META_POINT_ID)
LOCAL_MEMORY = ":memory:"


def _kind(kind: Kind) -> models.FieldCondition:
    return models.FieldCondition(key=Key.KIND, match=models.MatchValue(value=kind.value))


def _any_chunk() -> models.FieldCondition:
    """Chunks of every kind, quarantined included: for maintenance, never for search."""
    return models.FieldCondition(key=Key.KIND, match=models.MatchAny(any=list(CHUNK_KINDS)))


def _doc(doc_id: str) -> models.FieldCondition:
    return models.FieldCondition(key=Key.DOC_ID, match=models.MatchValue(value=doc_id))


def acl_chunk_filter(acl: AclFilter) -> models.Filter:
    # Applied inside the vector query and each prefetch: post-filtering top-k
    # would both leak timing and starve callers of their own documents.
    # kind == chunk also excludes quarantined chunks (their own kind), documents and meta.
    return models.Filter(
        must=[
            _kind(Kind.CHUNK),
            models.FieldCondition(key=Key.ACL_GROUPS, match=models.MatchAny(any=list(acl.labels))),
        ],
    )


def sparse_vector(v: Any) -> models.SparseVector:
    """A ``qdrant_edge.SparseVector`` as the client's model (same indices, same weights)."""
    return models.SparseVector(indices=list(v.indices), values=list(v.values))


class ServerIndex:
    """VectorIndex + DocumentCatalog on a Qdrant server collection (or qdrant-client local mode)."""

    search_releases_gil = True  # a server query is a network wait

    def __init__(
        self,
        *,
        url: str,
        name: str,
        model_id: str,
        dimension: int,
        api_key: Callable[[], SecretStr | None] | None = None,
        fusion: FusionParams | None = None,
        cipher: TextCipher | None = None,
        timeout_s: float = 10.0,
        shard_number: int = 1,
        replication_factor: int = 1,
        write_consistency_factor: int = 1,
        client: QdrantClient | None = None,
    ) -> None:
        """``client``: a ready client to use instead of connecting to ``url`` (tests share one
        local-mode client between two opens to exercise reopening); it is not closed by ``close``."""
        self.name = name
        self._fusion = fusion or FusionParams()
        self._cipher = cipher
        self._bm25 = Bm25()
        self._local = url == LOCAL_MEMORY or (
            client is not None and (client.init_options.get("location") or client.init_options.get("path")) is not None
        )
        self._owns_client = client is None
        # Local mode keeps plain Python structures without locking; the server client is thread-safe.
        self._lock = threading.RLock()
        self._closed = False
        try:
            if client is not None:
                self._client = client
            elif self._local:
                self._client = QdrantClient(location=LOCAL_MEMORY)
            else:
                # The key is read through the provider before every request, so a rotated one is used
                # without a restart (Qdrant takes it as a bearer token as well as an api-key header).
                bearer = _bearer(api_key) if api_key is not None and api_key() is not None else None
                # No version probe: it runs in a background thread that fails noisily when the server
                # is down; the collection_exists call below fails cleanly instead.
                self._client = QdrantClient(
                    url=url, auth_token_provider=bearer, timeout=max(1, round(timeout_s)), check_compatibility=False
                )
            if not self._client.collection_exists(name):
                self._create(dimension, shard_number, replication_factor, write_consistency_factor)
        except VectorIndexError:
            raise
        except Exception as exc:
            raise VectorIndexError("open", _safe(exc)) from None
        self._check_or_write_meta(model_id, dimension)

    # -- lifecycle -------------------------------------------------------
    def _create(self, dimension: int, shard_number: int, replication_factor: int, write_consistency: int) -> None:
        self._client.create_collection(
            self.name,
            vectors_config={DENSE_VECTOR: models.VectorParams(size=dimension, distance=models.Distance.COSINE)},
            # IDF is applied by the server at query time, so the stored BM25 weights stay
            # the same as Edge's and adding documents never requires re-weighting old ones.
            sparse_vectors_config={SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            shard_number=shard_number,
            replication_factor=replication_factor,
            write_consistency_factor=write_consistency,
        )
        with warnings.catch_warnings():
            # Local mode warns that payload indexes do nothing there (it scans); the server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            for key in INDEXED_KEYWORDS:
                self._client.create_payload_index(self.name, key.value, models.PayloadSchemaType.KEYWORD, wait=True)
            for key in INDEXED_BOOLS:
                self._client.create_payload_index(self.name, key.value, models.PayloadSchemaType.BOOL, wait=True)

    def _check_or_write_meta(self, model_id: str, dimension: int) -> None:
        meta = self.read_meta()
        if meta is None:
            point = models.PointStruct(id=_META_ID, vector={}, payload=meta_payload(model_id, dimension))
            self._call("write meta", self._client.upsert, self.name, [point], wait=True)
            return
        try:
            check_collection_meta(self.name, meta, model_id, dimension)
        except VectorIndexError:
            self.close()
            raise

    def read_meta(self) -> dict[str, Any] | None:
        recs = self._call(
            "read meta", self._client.retrieve, self.name, [_META_ID], with_payload=True, with_vectors=False
        )
        return dict(recs[0].payload or {}) if recs else None

    def update_meta(self, fields: Mapping[str, Any]) -> None:
        self._call("update meta", self._client.set_payload, self.name, dict(fields), points=[_META_ID], wait=True)

    def set_cipher(self, cipher: TextCipher | None) -> None:
        """Chunk text encryption at rest; set after opening, since the cipher keeps its keys in the meta point."""
        self._cipher = cipher

    def flush(self) -> None:
        """Writes are acknowledged with ``wait=True`` and the server keeps a WAL: nothing to flush."""

    def optimize(self) -> bool:
        """The server's optimizers run on their own (local mode scans): nothing to do."""
        return False

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._owns_client:
                    self._client.close()

    def ready(self) -> bool:
        if self._closed:
            return False
        try:
            with self._lock:
                return bool(self._client.collection_exists(self.name))
        except Exception:
            return False

    # -- VectorIndex -----------------------------------------------------
    def upsert(self, chunks: Sequence[IndexedChunk]) -> None:
        if not chunks:
            return
        points = [
            models.PointStruct(
                id=item.chunk.id,
                vector={
                    DENSE_VECTOR: list(item.dense),
                    SPARSE_VECTOR: sparse_vector(self._bm25.embed_document(item.chunk.text)),
                },
                payload=chunk_payload(item, self._cipher),
            )
            for item in chunks
        ]
        self._call("upsert", self._client.upsert, self.name, points, wait=True)

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
        dense_q = list(dense) if dense is not None else None
        sparse_q = sparse_vector(self._bm25.embed_query(text)) if text else None
        if mode == "hybrid" and (dense_q is None or sparse_q is None):
            mode = "dense" if dense_q is not None else "sparse"
        if mode == "dense":
            if dense_q is None:
                raise VectorIndexError("search", "dense mode needs a query vector")
            req = models.QueryRequest(query=dense_q, using=DENSE_VECTOR, filter=flt, limit=limit, with_payload=True)
            return self._hits(self._batch([req])[0], "dense")
        if mode == "sparse":
            if sparse_q is None:
                return []
            req = models.QueryRequest(query=sparse_q, using=SPARSE_VECTOR, filter=flt, limit=limit, with_payload=True)
            return self._hits(self._batch([req])[0], None)
        assert dense_q is not None and sparse_q is not None  # noqa: S101 - narrowed above
        if self._fusion.method == "convex":
            return self._convex(dense_q, sparse_q, flt, limit, fetch)
        fused = models.QueryRequest(
            prefetch=[
                models.Prefetch(query=dense_q, using=DENSE_VECTOR, filter=flt, limit=fetch),
                models.Prefetch(query=sparse_q, using=SPARSE_VECTOR, filter=flt, limit=fetch),
            ],
            query=self._server_fusion(),
            filter=flt,
            limit=limit,
            with_payload=True,
            with_vector=[DENSE_VECTOR],
        )
        points = self._batch([fused])[0]
        stored = {str(p.id): _dense_of(p) for p in points}
        return self._hits(points, cosine_scores(dense_q, stored))

    def _server_fusion(self) -> models.RrfQuery | models.FusionQuery:
        if self._fusion.method == "dbsf":
            return models.FusionQuery(fusion=models.Fusion.DBSF)
        return models.RrfQuery(rrf=models.Rrf(k=self._fusion.rrf_k, weights=self._fusion.weights))

    def _convex(
        self, dense_q: list[float], sparse_q: models.SparseVector, flt: models.Filter, limit: int, fetch: int
    ) -> list[Hit]:
        """Min-max convex fusion, done client-side as in ``EdgeIndex``: Qdrant has no such fusion."""
        reqs = [
            models.QueryRequest(query=dense_q, using=DENSE_VECTOR, filter=flt, limit=fetch, with_payload=True),
            models.QueryRequest(
                query=sparse_q,
                using=SPARSE_VECTOR,
                filter=flt,
                limit=fetch,
                with_payload=True,
                with_vector=[DENSE_VECTOR],
            ),
        ]
        dense_points, sparse_points = self._batch(reqs)
        points = {str(p.id): p for p in (*sparse_points, *dense_points)}
        dense_scores = {str(p.id): float(p.score) for p in dense_points}
        fused = fuse_convex(
            dense_scores, {str(p.id): float(p.score) for p in sparse_points}, self._fusion.dense_share, limit
        )
        # Hits found by BM25 alone still get their cosine, for the relevance threshold.
        missing = {pid: _dense_of(points[pid]) for pid, _ in fused if pid not in dense_scores}
        dense_scores.update(cosine_scores(dense_q, missing) if missing else {})
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

    def _batch(self, requests: list[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        responses = self._call("search", self._client.query_batch_points, self.name, requests)
        return [r.points for r in responses]

    def _hits(self, points: Sequence[models.ScoredPoint], dense: dict[str, float] | str | None) -> list[Hit]:
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
        flt = models.Filter(
            must=[_any_chunk(), _doc(doc_id)],
            must_not=[models.HasIdCondition(has_id=[str(uuid.UUID(i)) for i in keep_ids])] if keep_ids else None,
        )
        n = self._count(flt)
        if n:
            self._call("delete", self._client.delete, self.name, models.FilterSelector(filter=flt), wait=True)
        return n

    def count_chunks(self, doc_id: str | None = None) -> int:
        must: list[models.Condition] = [_any_chunk()]
        if doc_id:
            must.append(_doc(doc_id))
        return self._count(models.Filter(must=must))

    def chunk_ids(self, doc_id: str) -> list[str]:
        return [str(r.id) for r in self._scroll(models.Filter(must=[_any_chunk(), _doc(doc_id)]), payload=False)]

    # -- DocumentCatalog -------------------------------------------------
    def get_document(self, doc_id: str) -> DocumentRecord | None:
        recs = self._call(
            "get document",
            self._client.retrieve,
            self.name,
            [document_point_id(doc_id)],
            with_payload=True,
            with_vectors=False,
        )
        return document_from_payload(recs[0].payload or {}) if recs else None

    def put_document(self, record: DocumentRecord) -> None:
        self.put_documents([record])

    def put_documents(self, records: Sequence[DocumentRecord]) -> None:
        if not records:
            return
        points = [
            models.PointStruct(id=document_point_id(r.doc_id), vector={}, payload=document_payload(r)) for r in records
        ]
        self._call("put document", self._client.upsert, self.name, points, wait=True)

    def delete_document(self, doc_id: str) -> int:
        n = self.delete_chunks(doc_id)
        selector = models.PointIdsList(points=[document_point_id(doc_id)])
        self._call("delete document", self._client.delete, self.name, selector, wait=True)
        return n

    def list_documents(self, *, acl: AclFilter | None = None, root: str | None = None) -> list[DocumentRecord]:
        must: list[models.Condition] = [_kind(Kind.DOCUMENT)]
        if acl is not None:
            if acl.allows_nothing:
                return []
            must.append(models.FieldCondition(key=Key.ACL_GROUPS, match=models.MatchAny(any=list(acl.labels))))
        if root is not None:
            must.append(models.FieldCondition(key=Key.ROOT, match=models.MatchValue(value=root)))
        docs = [document_from_payload(r.payload or {}) for r in self._scroll(models.Filter(must=must), payload=True)]
        return sorted(docs, key=lambda d: d.doc_id)

    def set_document_acl(self, doc_id: str, acl_groups: Sequence[str]) -> None:
        # Payload-only update: vectors stay untouched, so no re-embedding.
        payload = {Key.ACL_GROUPS.value: list(acl_groups)}
        flt = models.Filter(must=[_doc(doc_id)])
        self._call("set acl", self._client.set_payload, self.name, payload, points=flt, wait=True)

    # -- helpers ---------------------------------------------------------
    def _count(self, flt: models.Filter) -> int:
        return int(self._call("count", self._client.count, self.name, count_filter=flt, exact=True).count)

    def _scroll(self, flt: models.Filter, *, payload: bool) -> list[models.Record]:
        out: list[models.Record] = []
        offset: Any = None
        while True:
            recs, offset = self._call(
                "scroll",
                self._client.scroll,
                self.name,
                scroll_filter=flt,
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=payload,
                with_vectors=False,
            )
            out.extend(recs)
            if offset is None:
                return out

    def _call(self, operation: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._local:
                with self._lock:
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)
        except Exception as exc:
            raise VectorIndexError(operation, _safe(exc)) from None


def _dense_of(point: models.ScoredPoint) -> Any:
    return point.vector.get(DENSE_VECTOR) if isinstance(point.vector, dict) else None


def _safe(exc: Exception) -> str:
    """Status and error class only: a server response body may echo payload text back."""
    if isinstance(exc, UnexpectedResponse):
        return f"status {exc.status_code}"
    if isinstance(exc, ResponseHandlingException):
        return "no response from the server"
    return type(exc).__name__


def _bearer(provider: Callable[[], SecretStr | None]) -> Callable[[], str]:
    def token() -> str:
        key = provider()
        return "" if key is None else key.get_secret_value()

    return token
