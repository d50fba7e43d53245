"""Payload codec shared by both Qdrant backends, so they store exactly the same thing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from docquery.core.collection import SCHEMA_VERSION, Key, Kind, list_key
from docquery.core.domain import DOCUMENT_STATES, Chunk, DocumentRecord, DocumentStatus, IndexedChunk
from docquery.core.ports import TextCipher


def chunk_payload(item: IndexedChunk, cipher: TextCipher | None) -> dict[str, Any]:
    c = item.chunk
    # aad binds the ciphertext to its point: copied onto another point (say, one
    # with a wider ACL) it no longer decrypts.
    text = cipher.encrypt(c.text, aad=c.id) if cipher is not None else c.text
    out: dict[str, Any] = {
        Key.KIND: (Kind.QUARANTINED_CHUNK if item.quarantined else Kind.CHUNK).value,
        Key.DOC_ID: c.doc_id,
        Key.SOURCE: c.source,
        Key.TITLE: c.title,
        Key.PAGE: c.page,
        Key.CHUNK_INDEX: c.chunk_index,
        Key.CONTENT_SHA256: c.content_sha256,
        Key.ACL_GROUPS: list(c.acl_groups),
        Key.INGESTED_AT: c.ingested_at,
        Key.TEXT: text,
        Key.FLAGS: list(c.flags),
        Key.SECTION: c.section,
        Key.CHAR_START: c.char_start,
        Key.CHAR_END: c.char_end,
    }
    if not item.quarantined:
        out[Key.READERS] = list(c.acl_groups)  # what every search filters on: searchable chunks only
    return out


def chunk_from_payload(point_id: object, payload: Mapping[str, Any], cipher: TextCipher | None) -> Chunk:
    text = str(payload.get(Key.TEXT, ""))
    if cipher is not None:
        text = cipher.decrypt(text, aad=str(point_id))
    page = payload.get(Key.PAGE)
    return Chunk(
        id=str(point_id),
        doc_id=str(payload.get(Key.DOC_ID, "")),
        source=str(payload.get(Key.SOURCE, "")),
        title=str(payload.get(Key.TITLE, "")),
        chunk_index=int(payload.get(Key.CHUNK_INDEX, 0)),
        text=text,
        content_sha256=str(payload.get(Key.CONTENT_SHA256, "")),
        acl_groups=tuple(payload.get(Key.ACL_GROUPS) or ()),
        page=None if page is None else str(page),
        ingested_at=str(payload.get(Key.INGESTED_AT, "")),
        flags=tuple(payload.get(Key.FLAGS) or ()),
        section=_int_or_none(payload.get(Key.SECTION)),
        char_start=_int_or_none(payload.get(Key.CHAR_START)),
        char_end=_int_or_none(payload.get(Key.CHAR_END)),
    )


def _int_or_none(value: object) -> int | None:
    # Chunks written before offsets were stored have none; a non-integer is treated the same.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def document_payload(record: DocumentRecord) -> dict[str, Any]:
    return {
        Key.KIND: Kind.DOCUMENT.value,
        Key.DOC_ID: record.doc_id,
        Key.LIST_KEY: list_key(record.doc_id),
        Key.SOURCE: record.source,
        Key.ROOT: record.root,
        Key.TITLE: record.title,
        Key.CONTENT_SHA256: record.content_sha256,
        Key.CHUNK_COUNT: record.chunk_count,
        Key.ACL_GROUPS: list(record.acl_groups),
        Key.INGESTED_AT: record.ingested_at,
        Key.STATUS: record.status,
        Key.EXTRA: dict(record.extra),
    }


def document_from_payload(payload: Mapping[str, Any]) -> DocumentRecord:
    status = _status(payload.get(Key.STATUS, "indexed"))
    return DocumentRecord(
        doc_id=str(payload[Key.DOC_ID]),
        source=str(payload.get(Key.SOURCE, "")),
        root=str(payload.get(Key.ROOT, "")),
        content_sha256=str(payload.get(Key.CONTENT_SHA256, "")),
        chunk_count=int(payload.get(Key.CHUNK_COUNT, 0)),
        acl_groups=tuple(payload.get(Key.ACL_GROUPS) or ()),
        title=str(payload.get(Key.TITLE, "")),
        ingested_at=str(payload.get(Key.INGESTED_AT, "")),
        status=status,
        extra={str(k): str(v) for k, v in (payload.get(Key.EXTRA) or {}).items()},
    )


def _status(value: object) -> DocumentStatus:
    # Records written before uploads say "complete" for "indexed"; an unknown word is read as not finished,
    # so the next ingest (or start) redoes the document rather than trusting it.
    if value == "complete":
        return "indexed"
    return value if isinstance(value, str) and value in DOCUMENT_STATES else "pending"  # type: ignore[return-value]


def meta_payload(model_id: str, dimension: int, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        Key.KIND: Kind.META.value,
        Key.MODEL_ID: model_id,
        Key.DIMENSION: dimension,
        Key.SCHEMA_VERSION: SCHEMA_VERSION,
    }
    if extra:
        out.update(extra)
    return out


def sort_hits_key(score: float, point_id: str) -> tuple[float, str]:
    """Deterministic order: RRF produces ties, so break them by id."""
    return (-score, point_id)
