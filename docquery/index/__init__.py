"""One Qdrant index over a narrow engine seam, with a translator per engine.

``open_edge`` opens a collection in the embedded engine (a directory); ``open_server``
opens one on a Qdrant server (a URL, or ``":memory:"`` for qdrant-client's local mode).
Both return the same ``QdrantIndex``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from docquery.core.ports import KeyProvider, TextCipher
from docquery.index.fusion import FusionParams
from docquery.index.store import QdrantIndex
from docquery.index.tuning import IndexTuning

if TYPE_CHECKING:
    from qdrant_client import QdrantClient


class ServerOptions(TypedDict, total=False):
    """How to reach the server and how a new collection is distributed.

    ``client``: a ready qdrant-client to use instead of connecting (``close`` leaves it open).
    """

    api_key: KeyProvider | None
    timeout_s: float
    shard_number: int
    replication_factor: int
    write_consistency_factor: int
    client: QdrantClient | None
    tuning: IndexTuning | None


__all__ = ["FusionParams", "IndexTuning", "QdrantIndex", "ServerOptions", "open_edge", "open_server"]


def open_edge(
    path: Path,
    *,
    name: str,
    model_id: str,
    dimension: int,
    fusion: FusionParams | None = None,
    cipher: TextCipher | None = None,
    tuning: IndexTuning | None = None,
) -> QdrantIndex:
    """``tuning``: HNSW, quantization and optimizer bounds for a new shard; search-time fields for any."""
    from docquery.index.edge import EdgeEngine  # the embedded engine loads only when used

    engine = EdgeEngine(path, dimension=dimension, tuning=tuning)
    return QdrantIndex(engine, name=name, model_id=model_id, dimension=dimension, fusion=fusion, cipher=cipher)


def open_server(
    *,
    url: str,
    name: str,
    model_id: str,
    dimension: int,
    fusion: FusionParams | None = None,
    cipher: TextCipher | None = None,
    meta_wait_s: float = 30.0,
    create: bool = True,
    **options: Unpack[ServerOptions],
) -> QdrantIndex:
    """``options``: the key provider, timeout and distribution (``ServerOptions``); ``create=False``: a
    missing collection is ``CollectionMissingError``, never created."""
    from docquery.index.server import ServerEngine  # qdrant-client loads only when used

    engine = ServerEngine(url=url, name=name, dimension=dimension, create=create, **options)
    return QdrantIndex(
        engine, name=name, model_id=model_id, dimension=dimension, fusion=fusion, cipher=cipher, meta_wait_s=meta_wait_s
    )
