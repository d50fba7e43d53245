"""Hybrid search over the engine seam: mode fallback, fusion, and hits with their dense cosine."""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_edge import Bm25, SparseVector

from docquery.core.collection import DENSE_VECTOR, SPARSE_VECTOR
from docquery.core.domain import AclFilter, Hit
from docquery.core.errors import VectorIndexError
from docquery.core.ports import SearchMode, TextCipher
from docquery.index.engine import Engine, Found, Nearest, RankFusion, Search, SparseLike, Where
from docquery.index.filters import acl_chunks
from docquery.index.fusion import FusionParams, cosine_scores, fuse_convex
from docquery.index.payload import chunk_from_payload, sort_hits_key


def sparse_of(bm25_vector: SparseVector) -> SparseLike:
    """A BM25 vector as the seam's type, not copied: ``SparseVector`` already has read-only indices and values."""
    return bm25_vector


class HybridSearch:
    """Dense, sparse (BM25) or fused search, ACL-filtered inside every engine query."""

    def __init__(self, engine: Engine, bm25: Bm25, fusion: FusionParams) -> None:
        self._engine = engine
        self.bm25 = bm25  # also encodes the documents at upsert, so both sides weigh words alike
        self._fusion = fusion
        self.cipher: TextCipher | None = None

    async def search(
        self,
        *,
        dense: Sequence[float] | None,
        text: str | None,
        acl: AclFilter,
        limit: int,
        mode: SearchMode,
        exact: bool = False,
    ) -> list[Hit]:
        if acl.allows_nothing or limit <= 0:
            return []  # fail closed: no groups, no query at all
        where = acl_chunks(acl)
        dense_q = Nearest(DENSE_VECTOR, list(dense)) if dense is not None else None
        sparse_q = Nearest(SPARSE_VECTOR, sparse_of(self.bm25.embed_query(text))) if text else None
        if mode == "hybrid" and (dense_q is None or sparse_q is None):
            mode = "dense" if dense_q is not None else "sparse"
        if mode == "dense":
            if dense_q is None:
                raise VectorIndexError("search", "dense mode needs a query vector")
            (points,) = await self._engine.query([Search(where, limit, nearest=dense_q, exact=exact)])
            return self._hits(points, {p.id: p.score for p in points})
        if mode == "sparse":
            if sparse_q is None:
                return []
            (points,) = await self._engine.query([Search(where, limit, nearest=sparse_q)])
            return self._hits(points, {})
        assert dense is not None and dense_q is not None and sparse_q is not None  # noqa: S101 - narrowed above
        fetch = max(limit, self._fusion.prefetch_limit)
        if self._fusion.method == "convex":
            return await self._convex(list(dense), dense_q, sparse_q, where, limit=limit, fetch=fetch, exact=exact)
        fusion = RankFusion(
            self._fusion.method, self._fusion.rrf_k, (self._fusion.dense_weight, self._fusion.sparse_weight)
        )
        branches = (dense_q, sparse_q)
        fused = Search(
            where, limit, prefetch=branches, prefetch_limit=fetch, fusion=fusion, with_dense=True, exact=exact
        )
        (points,) = await self._engine.query([fused])
        return self._hits(points, cosine_scores(dense, {p.id: p.dense for p in points}))

    async def _convex(
        self,
        dense: list[float],
        dense_q: Nearest,
        sparse_q: Nearest,
        where: Where,
        *,
        limit: int,
        fetch: int,
        exact: bool,
    ) -> list[Hit]:
        """Min-max convex fusion, client-side (Qdrant has none); both branches ACL-filtered in the engine."""
        dense_points, sparse_points = await self._engine.query(
            [
                Search(where, fetch, nearest=dense_q, exact=exact, ranked=limit),
                Search(where, fetch, nearest=sparse_q, with_dense=True),
            ]
        )
        points = {p.id: p for p in (*sparse_points, *dense_points)}
        cosine = {p.id: p.score for p in dense_points}
        fused = fuse_convex(cosine, {p.id: p.score for p in sparse_points}, self._fusion.dense_share, limit)
        # Hits found by BM25 alone still get their cosine, for the relevance threshold.
        missing = {pid: points[pid].dense for pid, _ in fused if pid not in cosine}
        cosine.update(cosine_scores(dense, missing) if missing else {})
        return self._hits([Found(pid, points[pid].payload, score) for pid, score in fused], cosine)

    def _hits(self, points: Sequence[Found], cosine: dict[str, float]) -> list[Hit]:
        """``cosine``: each hit's dense similarity where there is one (none in sparse mode)."""
        hits = [
            Hit(chunk=chunk_from_payload(p.id, p.payload, self.cipher), score=p.score, dense_score=cosine.get(p.id))
            for p in points
        ]
        hits.sort(key=lambda h: sort_hits_key(h.score, h.chunk.id))
        return hits
