"""Search structures of a collection, engine-neutral: HNSW, quantization, payload indexes, optimizer bounds.

Each translator turns ``IndexTuning`` into its engine's own config. The build-time fields
(HNSW, quantization, thresholds, segment size, payload index flags) are fixed when a
collection is created: an existing collection keeps the ones it was created with. The
search-time fields (``oversampling``, ``hnsw_ef``) apply to every collection on every query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from docquery.core.collection import INDEXED_KEYWORDS, Key

QuantizationKind = Literal["int8", "turbo4", "none"]

# The payload fields whose values get their own HNSW links (filterable HNSW): the readers, which
# every search filters on. ``kind`` = chunk holds nearly every point, so links for it would
# duplicate the whole graph; doc_id, root and content_sha256 only filter reads and deletes.
HNSW_PAYLOAD_KEYS: frozenset[Key] = frozenset({Key.READERS})
# Fields every search filters on, which Qdrant stores as tenants (``is_tenant``, its "tenant
# defragmentation" since 1.11): an optimized segment keeps the points of one value together, so the
# scan of a caller's scope reads fewer, contiguous blocks. The filter is the same; only the layout
# changes (docs/design.md).
TENANT_KEYS: frozenset[Key] = frozenset({Key.READERS})


class KeywordIndex(NamedTuple):
    key: Key
    hnsw: bool  # HNSW payload links of its own (filterable HNSW)
    tenant: bool  # stored by value (Qdrant's is_tenant)


@dataclass(frozen=True)
class IndexTuning:
    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    # Below this many KB of matching vectors (about 65k of 384 floats), a filtered search scores
    # the payload index's candidates exactly instead of walking the graph (Qdrant's query planner):
    # a caller's ACL scope up to that size gets exact recall; past it, the graph with ACL links.
    full_scan_threshold_kb: int = 100_000
    # int8 scalars (the default), or TurboQuant at 4 bits a dimension: half the RAM, the same
    # hybrid latency, weaker candidates before rescoring (docs/design.md).
    quantization: QuantizationKind = "int8"
    # Original float vectors stay in their segment files, read through the page cache (only the
    # oversampled candidates are rescored on them); the quantized copies searched first stay in RAM.
    originals_on_disk: bool = True
    quantile: float = 0.99
    # Candidates scored on the quantized vectors per result wanted, then rescored on the original vectors.
    # A hybrid's dense prefetch rescores its depth only (``rescoring``).
    oversampling: float = 2.0
    hnsw_ef: int | None = None  # None: the engine's default (ef_construct, at least the limit)
    # A segment is indexed (HNSW, quantized) once its unindexed vectors pass this many KB.
    indexing_threshold_kb: int = 10_000
    # Optimizations never merge segments past this size, which bounds what one optimize() rebuilds.
    max_segment_size_kb: int = 200_000

    @property
    def quantized(self) -> bool:
        return self.quantization != "none"

    @property
    def vectors_on_disk(self) -> bool:
        """Originals on disk only beside quantized copies: without them every distance would read the disk."""
        return self.originals_on_disk and self.quantized

    def rescoring(self, *, depth: int, wanted: int) -> float:
        """Oversampling for a dense search returning ``depth`` results whose first ``wanted`` are ranked on.

        Oversampling keeps those first ``wanted`` exact despite the quantization error: the engine scores
        ``wanted x oversampling`` candidates on the quantized vectors and rescores them on the originals.
        A hybrid's dense prefetch is deeper than that (100 for a top 10), so it is rescored at its depth,
        not at ``depth x oversampling``: its top ``wanted x oversampling`` stay exact, and only which
        candidates near its last place enter the fusion can change. Measured: 99.78 % of SciFact's fused
        top 10s unchanged and the same nDCG@10, against half the rescoring reads (each segment reads its
        candidates' originals from disk: 900 reads a million-chunk hybrid query instead of 1,800;
        docs/design.md).
        """
        if depth <= 0:
            return self.oversampling
        return max(1.0, min(self.oversampling, wanted * self.oversampling / depth))

    def seal_points(self, dimension: int) -> int:
        """Dense points of ``dimension`` floats that fill a segment of ``max_segment_size_kb``.

        The embedded engine seals its appendable segment at this size during a write, so a large
        collection is several bounded segments (searched in parallel; the scope of a caller who sees
        under about half of the collection stays under the full-scan threshold in each) instead of
        one that grows with every write.
        """
        return self.max_segment_size_kb * 1024 // (dimension * 4)

    @staticmethod
    def payload_keys() -> tuple[KeywordIndex, ...]:
        """Each keyword-indexed field, whether it gets HNSW payload links, and whether it is a tenant."""
        return tuple(KeywordIndex(key, key in HNSW_PAYLOAD_KEYS, key in TENANT_KEYS) for key in INDEXED_KEYWORDS)
