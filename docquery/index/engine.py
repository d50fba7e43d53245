"""The engine seam: what the one index asks of a Qdrant engine, in engine-neutral terms.

A translator per engine (``edge.py``: the embedded qdrant-edge shard; ``server.py``:
qdrant-client) turns these requests into its own types. Everything else (search modes,
fusion, hits, payloads, the document catalog, the meta point) lives once, in ``store.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from docquery.core.collection import DENSE_VECTOR, SPARSE_VECTOR


@dataclass(frozen=True)
class Match:
    """Payload field ``key`` equals one of ``values``."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Where:
    """All of ``must``, at least one of ``any_of`` (when it has any), and none of ``except_ids``.

    ``any_of`` holds one single-valued ``Match`` per value where a search asks for one of many
    values: the engine takes each as a primary clause (ids merged through a bitmap, no check of
    the candidate again), where one many-valued ``Match`` merges its ids through a hash set. An
    empty ``any_of`` is no clause at all, so a filter that must admit nothing may not rely on it.
    """

    must: tuple[Match, ...]  # no default: a filter that admits every point is spelled out, as ``must=()``
    except_ids: tuple[str, ...] = ()
    any_of: tuple[Match, ...] = ()


class SparseLike(Protocol):
    """A sparse vector, read-only: ``Sparse`` or BM25's own ``qdrant_edge.SparseVector``, passed as it is."""

    @property
    def indices(self) -> Sequence[int]: ...

    @property
    def values(self) -> Sequence[float]: ...


@dataclass(frozen=True)
class Sparse:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class Nearest:
    """Nearest neighbours of ``vector`` in the named vector ``using``."""

    using: str
    vector: list[float] | SparseLike


@dataclass(frozen=True)
class RankFusion:
    """Fusion done inside the engine: weighted reciprocal rank, or distribution-based."""

    method: Literal["rrf", "dbsf"]
    rrf_k: int = 60
    weights: tuple[float, float] = (1.0, 1.0)


@dataclass(frozen=True)
class Search:
    """One query: nearest to ``nearest``, or ``fusion`` over the ``prefetch`` branches.

    ``where`` is applied inside the engine: to every prefetch branch, or to the query when it has none.
    """

    where: Where
    limit: int
    nearest: Nearest | None = None
    prefetch: tuple[Nearest, ...] = ()
    prefetch_limit: int = 0
    fusion: RankFusion | None = None
    with_dense: bool = False
    exact: bool = False  # brute-force dense scoring, no HNSW or quantization: the reference for recall
    # Of a dense search's ``limit`` results, how many the caller ranks on (0: all of them). A deeper
    # list is rescored at its depth, not oversampled beyond it: only which candidates near its last
    # place reach the fusion can change (IndexTuning.rescoring).
    ranked: int = 0

    def dense_depth(self) -> tuple[int, int]:
        """Results a dense branch returns, and how many of them are ranked on."""
        if self.fusion is not None:
            return self.prefetch_limit, self.limit  # the fused top ``limit`` draws on each branch's top
        return self.limit, self.ranked or self.limit


@dataclass(frozen=True)
class Found:
    """A point as an engine returns it: id, score (0 for reads), payload, stored dense vector."""

    id: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    score: float = 0.0
    dense: Sequence[float] | None = None


@dataclass(frozen=True)
class Point:
    """A point to write; a document record or the meta point has no vectors."""

    id: str
    payload: Mapping[str, Any]
    dense: Sequence[float] | None = None
    sparse: SparseLike | None = None

    def vectors(self, sparse_type: Callable[[SparseLike], Any]) -> dict[str, Any]:
        """The named vectors, the sparse one converted to the engine's own type."""
        if self.dense is None:
            out: dict[str, Any] = {}
        else:  # the engines take lists: copy only what is not one already
            out = {DENSE_VECTOR: self.dense if isinstance(self.dense, list) else list(self.dense)}
        if self.sparse is not None:
            out[SPARSE_VECTOR] = sparse_type(self.sparse)
        return out


@dataclass(frozen=True)
class Stats:
    """What the engine reports of its collection's build state."""

    points: int
    indexed_vectors: int  # dense vectors in HNSW segments, plus every sparse vector (always indexed)
    segments: int
    seal_s: float = 0.0  # seconds this process spent sealing full segments while writing (embedded engine)


class Engine(Protocol):
    """A Qdrant engine holding one collection. Errors leave as ``VectorIndexError``."""

    created: bool  # this open created the collection (the meta point is still to write)

    async def query(self, searches: Sequence[Search]) -> list[list[Found]]: ...

    def upsert(self, points: Sequence[Point]) -> None: ...

    def delete(self, *, ids: Sequence[str] = (), where: Where | None = None) -> None: ...

    def set_payload(
        self, payload: Mapping[str, Any], *, ids: Sequence[str] = (), where: Where | None = None
    ) -> None: ...

    def retrieve(self, ids: Sequence[str]) -> list[Found]: ...

    def scroll(self, where: Where, *, with_payload: bool, offset: Any, limit: int) -> tuple[list[Found], Any]:
        """One page from ``offset`` (None: the start); returns the page and the next offset (None: the end)."""
        ...

    def scroll_ordered(self, where: Where, *, key: str, start_from: int | None, limit: int) -> list[Found]:
        """Up to ``limit`` points (with payload) in ascending order of the integer field ``key``, from
        ``start_from`` inclusive, read through ``key``'s range index: the cost is the page, not the collection."""
        ...

    def count(self, where: Where) -> int: ...

    def create_indexes(self) -> None: ...

    def create_order_index(self, key: str) -> None:
        """An integer range index on ``key`` (idempotent), for :meth:`scroll_ordered`."""
        ...

    def create_keyword_index(self, key: str) -> None:
        """A keyword index on ``key``, a payload path (idempotent), so a match on it is a lookup, not a scan."""
        ...

    def flush(self) -> None: ...

    def optimize(self) -> bool: ...

    def stats(self) -> Stats: ...

    def ready(self) -> bool: ...

    def close(self) -> None: ...

    async def aclose(self) -> None:
        """Release what belongs to the running event loop (connection pools); the engine stays usable."""
        ...


def first_line(exc: BaseException, limit: int = 200) -> str:
    """An engine message's first line, bounded; the class name when it has none."""
    text = str(exc)
    return text.splitlines()[0][:limit] if text else type(exc).__name__
