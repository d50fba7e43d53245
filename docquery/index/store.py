"""The one Qdrant index: ``VectorIndex`` + ``DocumentCatalog`` over an engine (embedded Edge or a server).

Both engines store the same payloads (``payload.py``), the same sparse vectors (BM25 from
``qdrant_edge.Bm25``, computed here, with the engine applying IDF at query time), and run
the same ACL-filtered queries (``search.py``). ``tests/integration/test_index_contract.py``
runs one suite on both and checks that they return the same hits for the same data.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_edge import Bm25

from docquery.core.collection import META_POINT_ID, Key, Kind, check_collection_meta, document_point_id
from docquery.core.domain import AclFilter, Chunk, DocumentRecord, Hit, IndexedChunk
from docquery.core.ports import SearchMode, TextCipher
from docquery.index import filters
from docquery.index.engine import Engine, Found, Match, Point, Stats, Where
from docquery.index.fusion import FusionParams
from docquery.index.payload import (
    chunk_from_payload,
    chunk_payload,
    document_from_payload,
    document_payload,
    meta_payload,
)
from docquery.index.search import HybridSearch, sparse_of

_META_ID = str(META_POINT_ID)
_SCROLL_PAGE = 512


class QdrantIndex:
    """The index over one collection. ``engine`` is opened by the caller and closed here."""

    def __init__(
        self,
        engine: Engine,
        *,
        name: str,
        model_id: str,
        dimension: int,
        fusion: FusionParams | None = None,
        cipher: TextCipher | None = None,
        meta_wait_s: float = 0.0,
    ) -> None:
        self.name = name
        self._engine = engine
        self._search = HybridSearch(engine, Bm25(), fusion or FusionParams())
        self.set_cipher(cipher)
        try:
            self._open_meta(model_id, dimension, meta_wait_s)
        except BaseException:
            engine.close()
            raise

    # -- lifecycle -------------------------------------------------------
    def _open_meta(self, model_id: str, dimension: int, wait_s: float) -> None:
        """Check the meta point, or write it when this collection has none yet.

        Another ingest shard that created the collection writes its meta point last (after
        the payload indexes): wait up to ``wait_s`` for it before finishing the creation here.
        Whoever wrote it, read it back and check it against this process's model.
        """
        meta = self.read_meta()
        deadline = time.monotonic() + wait_s
        while meta is None and not self._engine.created and time.monotonic() < deadline:
            time.sleep(0.1)
            meta = self.read_meta()
        if meta is None:
            if not self._engine.created:
                self._engine.create_indexes()  # idempotent: finishes a creation that stopped early
            self._engine.upsert([Point(_META_ID, meta_payload(model_id, dimension))])
            self._engine.flush()
            meta = self.read_meta() or {}
        check_collection_meta(self.name, meta, model_id, dimension)

    def read_meta(self) -> dict[str, Any] | None:
        records = self._engine.retrieve([_META_ID])
        return dict(records[0].payload) if records else None

    def update_meta(self, fields: Mapping[str, Any]) -> None:
        self._engine.set_payload(fields, ids=[_META_ID])
        self._engine.flush()

    def set_cipher(self, cipher: TextCipher | None) -> None:
        """Chunk text encryption at rest; set after opening, since the cipher keeps its keys in the meta point."""
        self._cipher = cipher
        self._search.cipher = cipher

    def flush(self) -> None:
        self._engine.flush()

    def optimize(self) -> bool:
        """Build the engine's search structures where it does not on its own (Edge); call it after a bulk ingest."""
        return self._engine.optimize()

    def stats(self) -> Stats:
        """Points, indexed vectors and segments, as the engine reports them."""
        return self._engine.stats()

    def ready(self) -> bool:
        return self._engine.ready()

    def close(self) -> None:
        self._engine.close()

    async def aclose(self) -> None:
        """Release what belongs to the running event loop (the async client's connections)."""
        await self._engine.aclose()

    # -- VectorIndex -----------------------------------------------------
    def upsert(self, chunks: Sequence[IndexedChunk]) -> None:
        if not chunks:
            return
        points = [
            Point(
                id=str(uuid.UUID(item.chunk.id)),
                payload=chunk_payload(item, self._cipher),
                dense=item.dense,
                sparse=sparse_of(self._search.bm25.embed_document(item.index_text or item.chunk.text)),
            )
            for item in chunks
        ]
        self._engine.upsert(points)

    async def search(
        self,
        *,
        dense: Sequence[float] | None,
        text: str | None,
        acl: AclFilter,
        limit: int,
        mode: SearchMode = "hybrid",
        exact: bool = False,
    ) -> list[Hit]:
        """``exact``: score the dense branch by brute force (no HNSW, no quantization), as the recall reference."""
        return await self._search.search(dense=dense, text=text, acl=acl, limit=limit, mode=mode, exact=exact)

    def delete_chunks(self, doc_id: str, *, keep_ids: Sequence[str] = ()) -> int:
        where = filters.doc_chunks(doc_id, except_ids=tuple(keep_ids))
        n = self._engine.count(where)
        if n:
            self._engine.delete(where=where)
        return n

    def count_chunks(self, doc_id: str | None = None) -> int:
        must = (filters.any_chunk(), filters.doc(doc_id)) if doc_id else (filters.any_chunk(),)
        return self._engine.count(Where(must=must))

    def chunk_ids(self, doc_id: str) -> list[str]:
        return [p.id for p in self._scroll(filters.doc_chunks(doc_id), with_payload=False)]

    # -- DocumentCatalog -------------------------------------------------
    def get_document(self, doc_id: str) -> DocumentRecord | None:
        records = self._engine.retrieve([document_point_id(doc_id)])
        return document_from_payload(records[0].payload) if records else None

    def put_document(self, record: DocumentRecord) -> None:
        self.put_documents([record])

    def put_documents(self, records: Sequence[DocumentRecord]) -> None:
        if records:
            self._engine.upsert([Point(document_point_id(r.doc_id), document_payload(r)) for r in records])

    def delete_document(self, doc_id: str) -> int:
        n = self.delete_chunks(doc_id)
        self._engine.delete(ids=[document_point_id(doc_id)])
        return n

    def list_documents(self, *, acl: AclFilter | None = None, root: str | None = None) -> list[DocumentRecord]:
        must = [filters.kind(Kind.DOCUMENT)]
        if acl is not None:
            if acl.allows_nothing:
                return []
            must.append(filters.groups(acl))
        if root is not None:
            must.append(Match(Key.ROOT.value, (root,)))
        found = self._scroll(Where(must=tuple(must)), with_payload=True)
        return sorted((document_from_payload(p.payload) for p in found), key=lambda d: d.doc_id)

    def read_passages(self, doc_id: str, chunk_indexes: Sequence[int], acl: AclFilter) -> dict[int, Chunk]:
        """The document's searchable chunks at these indexes that ``acl`` may read: the ACL filter is in the
        engine's query, so another group's chunk is not found, exactly as a missing one is not. It reads the
        document's readable points (``chunk_index`` is not a keyword the engine can match), decrypting only
        the ones returned."""
        if acl.allows_nothing or not chunk_indexes:
            return {}
        wanted = set(chunk_indexes)
        readable = Where(must=(filters.doc(doc_id),), any_of=filters.acl_chunks(acl).any_of)
        found: dict[int, Chunk] = {}
        for point in self._scroll(readable, with_payload=True):
            n = point.payload.get(Key.CHUNK_INDEX.value)
            if isinstance(n, int) and n in wanted:
                found[n] = chunk_from_payload(point.id, point.payload, self._cipher)
        return found

    def set_document_acl(self, doc_id: str, acl_groups: Sequence[str]) -> None:
        # Payload-only update: vectors stay untouched, so no re-embedding. The searchable chunks
        # first, readers and groups in one write per point, so a search follows the new ACL from
        # the first write on; then the groups of the document's other points (record, quarantined),
        # which never get readers.
        groups = list(acl_groups)
        searchable = Where(must=(filters.kind(Kind.CHUNK), filters.doc(doc_id)))
        self._engine.set_payload({Key.READERS.value: groups, Key.ACL_GROUPS.value: groups}, where=searchable)
        others = Where(must=(filters.kind(Kind.QUARANTINED_CHUNK, Kind.DOCUMENT), filters.doc(doc_id)))
        self._engine.set_payload({Key.ACL_GROUPS.value: groups}, where=others)

    def _scroll(self, where: Where, *, with_payload: bool) -> list[Found]:
        out: list[Found] = []
        offset: Any = None
        while True:
            page, offset = self._engine.scroll(where, with_payload=with_payload, offset=offset, limit=_SCROLL_PAGE)
            out.extend(page)
            if offset is None:
                return out
