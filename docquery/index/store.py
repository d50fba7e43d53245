"""The one Qdrant index: ``VectorIndex`` + ``DocumentCatalog`` over an engine (embedded Edge or a server).

Both engines store the same payloads (``payload.py``), the same sparse vectors (BM25 from
``qdrant_edge.Bm25``, computed here, with the engine applying IDF at query time), and run
the same ACL-filtered queries (``search.py``). ``tests/integration/test_index_contract.py``
runs one suite on both and checks that they return the same hits for the same data.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_edge import Bm25

from docquery.core.collection import (
    DOC_ID_KEY_BYTES,
    LISTING_VERSION,
    META_POINT_ID,
    Key,
    Kind,
    check_collection_meta,
    document_point_id,
    list_key,
)
from docquery.core.domain import AclFilter, Chunk, DocumentRecord, Hit, IndexedChunk, QuarantinedChunk
from docquery.core.ports import SearchMode, TextCipher
from docquery.core.uploads import EXTRA_JOB, EXTRA_TENANT
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

log = logging.getLogger(__name__)
_META_ID = str(META_POINT_ID)
_SCROLL_PAGE = 512


# Keys of a record's ``extra`` that are matched on: the upload quota finds a tenant's records by its tenant at
# every upload, a job's status its records by the job. Unindexed, each match read every document record, with
# the event loop stalled (the engine holds the GIL): at 50,000, 133 ms for a tenant holding none and 136 ms for a
# job of 20 (benchmarks/list_page.py --tenants).
INDEXED_EXTRA = (EXTRA_TENANT, EXTRA_JOB)


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
        self._listing_keyed = False
        self._extra_indexed = False
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
            self._engine.create_order_index(Key.LIST_KEY.value)
            made = {
                Key.LISTING.value: LISTING_VERSION,  # empty: every record it gets will carry its key
                Key.DOC_ID_KEY.value: os.urandom(DOC_ID_KEY_BYTES).hex(),  # kept with the collection, for good
            }
            self._engine.upsert([Point(_META_ID, meta_payload(model_id, dimension, made))])
            self._engine.flush()
            meta = self.read_meta() or {}
        check_collection_meta(self.name, meta, model_id, dimension)
        if Key.DOC_ID_KEY.value not in meta:
            log.warning(
                "collection %r has no doc-id key (made before keyed ids): its doc_ids are unkeyed hashes of paths, "
                "which confirm a guessed path; re-ingest into a new collection to key them (docs/security.md)",
                self.name,
            )

    def doc_id_key(self) -> bytes | None:
        """The collection's doc-id key, or None for a collection made before keyed ids (unkeyed ids)."""
        value = (self.read_meta() or {}).get(Key.DOC_ID_KEY.value)
        return bytes.fromhex(value) if isinstance(value, str) else None

    def ensure_doc_id_key(self) -> bytes | None:
        """For a writer: the key, made now when the collection has no document yet (no id to keep)."""
        self._index_extra()  # an upload asks for the key first, then counts its tenant's records
        key = self.doc_id_key()
        if key is not None or self._engine.count(Where(must=(filters.kind(Kind.DOCUMENT),))):
            return key
        self.update_meta({Key.DOC_ID_KEY.value: os.urandom(DOC_ID_KEY_BYTES).hex()})
        return self.doc_id_key()  # as stored: a concurrent writer's, if it won

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
            if not self._listing_keyed:
                self.key_listing()  # the writer migrates a collection from before ordered listings
            self._index_extra()
            self._engine.upsert([Point(document_point_id(r.doc_id), document_payload(r)) for r in records])

    def delete_document(self, doc_id: str) -> int:
        n = self.delete_chunks(doc_id)
        self._engine.delete(ids=[document_point_id(doc_id)])
        return n

    def list_documents(
        self, *, acl: AclFilter | None = None, root: str | None = None, extra: tuple[str, str] | None = None
    ) -> list[DocumentRecord]:
        must = [filters.kind(Kind.DOCUMENT)]
        if acl is not None:
            if acl.allows_nothing:
                return []
            must.append(filters.groups(acl))
        if root is not None:
            must.append(Match(Key.ROOT.value, (root,)))
        if extra is not None:  # indexed for INDEXED_EXTRA keys; any other is checked record by record
            must.append(Match(f"{Key.EXTRA.value}.{extra[0]}", (extra[1],)))
        found = self._scroll(Where(must=tuple(must)), with_payload=True)
        return sorted((document_from_payload(p.payload) for p in found), key=lambda d: d.doc_id)

    def list_page(
        self, *, acl: AclFilter, after: str | None, limit: int, title: str | None = None
    ) -> tuple[list[DocumentRecord], bool]:
        """Up to ``limit`` records ``acl`` may see, in ``(list_key, doc_id)`` order after the record ``after``,
        and whether more follow; with ``title``, only those whose title holds it (any case).

        An ordered scroll over the integer index of ``list_key`` reads from the cursor's key on, about a
        page of records. A title filter, and a collection written before that key existed (no ``listing``
        mark on its meta point, until an ingest writes a record and so migrates it), read the caller's
        whole catalogue and sort it: titles are not indexed for substring matching.
        """
        if acl.allows_nothing:
            return [], False
        where = Where(must=(filters.kind(Kind.DOCUMENT), filters.groups(acl)))
        if title is not None:
            wanted = title.casefold()
            every = (document_from_payload(p.payload) for p in self._scroll(where, with_payload=True))
            return _page_after(sorted((r for r in every if wanted in r.title.casefold()), key=_order), after, limit)
        if not self.listing_keyed():
            every = (document_from_payload(p.payload) for p in self._scroll(where, with_payload=True))
            return _page_after(sorted(every, key=_order), after, limit)
        start = list_key(after) if after is not None else None
        want = limit + 1
        while True:
            found = self._engine.scroll_ordered(where, key=Key.LIST_KEY.value, start_from=start, limit=want)
            records = sorted((document_from_payload(p.payload) for p in found), key=_order)
            page, more = _page_after(records, after, limit)
            if len(found) < want:
                return page, more  # the end of the listing
            # What was read is every record below its last key: the page is complete when it ends below it
            # (records of one key come in no set order, so the last key's may be partly read).
            if len(page) == limit and list_key(records[-1].doc_id) != list_key(page[-1].doc_id):
                return page, True
            want *= 2

    def _index_extra(self) -> None:
        """The writer indexes INDEXED_EXTRA, once a process: idempotent, so collections made before it get it too."""
        if not self._extra_indexed:
            for key in INDEXED_EXTRA:
                self._engine.create_keyword_index(f"{Key.EXTRA.value}.{key}")
            self._extra_indexed = True

    def listing_keyed(self) -> bool:
        """Every document record carries its list key (read each time: an ingest may migrate meanwhile)."""
        self._listing_keyed = (self.read_meta() or {}).get(Key.LISTING.value) == LISTING_VERSION
        return self._listing_keyed

    def key_listing(self) -> int:
        """Give every document record its list key and the collection the index; returns how many were keyed."""
        if self.listing_keyed():
            return 0
        self._engine.create_order_index(Key.LIST_KEY.value)
        keyed = 0
        for p in self._scroll(Where(must=(filters.kind(Kind.DOCUMENT),)), with_payload=True):
            doc_id = str(p.payload.get(Key.DOC_ID, ""))
            if p.payload.get(Key.LIST_KEY.value) != list_key(doc_id):
                self._engine.set_payload({Key.LIST_KEY.value: list_key(doc_id)}, ids=[p.id])
                keyed += 1
        self.update_meta({Key.LISTING.value: LISTING_VERSION})
        self._listing_keyed = True
        return keyed

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

    def list_quarantined(
        self, *, acl: AclFilter, after: str | None, limit: int, doc_id: str | None = None
    ) -> tuple[list[QuarantinedChunk], str | None]:
        """Quarantined chunks ``acl`` may see, one engine scroll of ``limit`` points: a scroll runs in
        point-id order and hands back the id the next page starts at, so that id is the position. The
        text is never decrypted nor returned."""
        if acl.allows_nothing:
            return [], None
        must = [filters.kind(Kind.QUARANTINED_CHUNK), filters.groups(acl)]
        if doc_id is not None:
            must.append(filters.doc(doc_id))
        found, offset = self._engine.scroll(Where(must=tuple(must)), with_payload=True, offset=after, limit=limit)
        return [_quarantined(p) for p in found], None if offset is None else str(offset)

    def _scroll(self, where: Where, *, with_payload: bool) -> list[Found]:
        out: list[Found] = []
        offset: Any = None
        while True:
            page, offset = self._engine.scroll(where, with_payload=with_payload, offset=offset, limit=_SCROLL_PAGE)
            out.extend(page)
            if offset is None:
                return out


def _quarantined(point: Found) -> QuarantinedChunk:
    p = point.payload
    page = p.get(Key.PAGE)
    return QuarantinedChunk(
        id=point.id,
        doc_id=str(p.get(Key.DOC_ID, "")),
        source=str(p.get(Key.SOURCE, "")),
        title=str(p.get(Key.TITLE, "")),
        page=None if page is None else str(page),
        chunk_index=int(p.get(Key.CHUNK_INDEX, 0)),
        flags=tuple(str(f) for f in p.get(Key.FLAGS) or ()),
    )


def _order(record: DocumentRecord) -> tuple[int, str]:
    return (list_key(record.doc_id), record.doc_id)


def _page_after(records: list[DocumentRecord], after: str | None, limit: int) -> tuple[list[DocumentRecord], bool]:
    """The first ``limit`` of ``records`` (sorted by ``_order``) past ``after``, and whether more follow."""
    if after is not None:
        mark = (list_key(after), after)
        records = [r for r in records if _order(r) > mark]
    return records[:limit], len(records) > limit
