"""Fusion parameters for hybrid dense + BM25 search, shared by both engines.

Three methods:

* ``rrf``: weighted reciprocal rank fusion, inside Qdrant;
* ``dbsf``: distribution-based score fusion, inside Qdrant (weights unused);
* ``convex``: min-max normalise each branch's scores over its fetched list, then
  ``share * dense + (1 - share) * sparse`` with ``share = dense_weight /
  (dense_weight + sparse_weight)``. Qdrant has no such fusion, so the index runs
  the two filtered branches in one batch and fuses client-side with
  ``fuse_convex``; the ACL filter still runs inside both queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

FusionMethod = Literal["rrf", "dbsf", "convex"]


@dataclass(frozen=True)
class FusionParams:
    # DBSF: the best on the SciFact train split, runs inside the engine on both backends,
    # and has no weights to over-fit (docs/design.md).
    method: FusionMethod = "dbsf"
    rrf_k: int = 60
    dense_weight: float = 1.0
    sparse_weight: float = 1.0
    prefetch_limit: int = 100

    @property
    def dense_share(self) -> float:
        total = self.dense_weight + self.sparse_weight
        return self.dense_weight / total if total > 0 else 0.5


def _minmax(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi <= lo:
        return dict.fromkeys(scores, 1.0)  # one hit, or all tied: each is the best of its list
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


def fuse_convex(
    dense: Mapping[str, float], sparse: Mapping[str, float], dense_share: float, limit: int
) -> list[tuple[str, float]]:
    """Top ``limit`` ids by ``share * minmax(dense) + (1 - share) * minmax(sparse)``.

    An id missing from one branch gets 0 there (below that branch's fetched minimum).
    Ties are broken by id, so both backends return the same order.
    """
    d, s = _minmax(dense), _minmax(sparse)
    fused = {k: dense_share * d.get(k, 0.0) + (1.0 - dense_share) * s.get(k, 0.0) for k in d.keys() | s.keys()}
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def cosine_scores(query: Sequence[float], stored: Mapping[str, Any]) -> dict[str, float]:
    """Cosine of the query with each hit's stored dense vector (id -> vector, or None).

    Fused scores are not similarities, and the relevance threshold needs one for every
    hit. The engine stores cosine vectors at unit length, so one dot product per hit
    replaces a second filtered search over the collection.
    """
    q = np.asarray(query, dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return {}
    q /= norm
    return {pid: float(np.dot(q, np.asarray(v, dtype=np.float64))) for pid, v in stored.items() if v is not None}
