"""Fusion parameters for hybrid dense + BM25 search, shared by both backends."""

from __future__ import annotations

from dataclasses import dataclass

from qdrant_edge import Fusion


@dataclass(frozen=True)
class FusionParams:
    rrf_k: int = 60
    dense_weight: float = 1.0
    sparse_weight: float = 1.0
    prefetch_limit: int = 50

    @property
    def weights(self) -> list[float]:
        return [self.dense_weight, self.sparse_weight]

    def edge_fusion(self) -> Fusion:
        fusion: Fusion = Fusion.Rrf(k=self.rrf_k, weights=self.weights)  # type: ignore[assignment]
        return fusion
