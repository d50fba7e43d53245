"""``GET /v1/documents`` (what the caller may see, paged) and ``DELETE /v1/documents/{doc_id}`` (admin).

Paging is by keyset: documents come in the index's listing order and the cursor
is the last ``doc_id`` of a page, sealed for the caller (docquery.api.cursors). A
page stays correct while ingest adds or removes documents (no offset drift), and
a cursor names nothing the caller could not see on the page it came from.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from docquery.api.cursors import CursorSealer
from docquery.api.deps import AdminCall, QueryCall
from docquery.api.errors import ApiError
from docquery.api.schemas import DeleteResult, DocumentInfo, DocumentList
from docquery.rag.citation_fields import plain_field

router = APIRouter(prefix="/v1")

DEFAULT_PAGE = 100
MAX_PAGE = 500
_MAX_CURSOR_CHARS = 4096  # a sealed doc_id of at most 512 characters (2 KiB of UTF-8), with room
LISTING = "documents"
# One answer for every cursor that does not open, so none can be told apart (another caller's included).
BAD_CURSOR = "invalid request: cursor: not a next_cursor of this listing for this caller, or expired"


def resume_after(call: QueryCall | AdminCall, cursor: str | None, listing: str) -> str | None:
    """Where a page starts: the position ``cursor`` seals for this caller and listing, or None for the first
    page. Any cursor that does not open (tampered, expired, another caller's or listing's) is one 422."""
    if cursor is None:
        return None
    sealer: CursorSealer = call.request.app.state.cursors
    after = sealer.open(cursor, principal_id=call.principal.id, listing=listing)
    if after is None:
        raise ApiError(422, BAD_CURSOR)
    return after


def cursor_query(max_chars: int) -> Any:
    """The ``cursor`` query parameter of a listing: a sealed token in base64url, at most ``max_chars``."""
    return Query(max_length=max_chars, pattern=r"^[A-Za-z0-9_-]+$", description="`next_cursor` of the page before.")


@router.get("/documents", response_model=DocumentList)
async def list_documents(
    call: QueryCall,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Documents per page.")] = DEFAULT_PAGE,
    cursor: Annotated[str | None, cursor_query(_MAX_CURSOR_CHARS)] = None,
    title: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only titles containing this (any case).")
    ] = None,
) -> DocumentList:
    principal, c, ctx = call.principal, call.components, call.ctx
    after = resume_after(call, cursor, LISTING)
    # The ACL filter goes into the index query itself, from the verified principal.
    # One page read from the index, in its order, from the cursor on (docquery.index.store.list_page).
    records, more = await asyncio.to_thread(
        c.index.list_page, acl=principal.acl(), after=after, limit=limit, title=title
    )
    ctx.doc_ids = [r.doc_id for r in records]
    ctx.outcome = "listed"
    # No acl_groups or ingest root in the listing: a shared document would
    # reveal the names of groups the caller is not in.
    # Every string here comes from the index, i.e. from a document or its file name: title and
    # source are plain text like a citation's (``citation_fields``), the rest made safe Markdown.
    label = c.pipeline.sanitizer.label
    docs = [
        DocumentInfo(
            doc_id=label(r.doc_id),
            source=plain_field(r.source),
            title=plain_field(r.title),
            chunk_count=r.chunk_count,
            ingested_at=label(r.ingested_at),
            status=r.status,
        )
        for r in records
    ]
    sealer: CursorSealer = call.request.app.state.cursors
    next_cursor = sealer.seal(records[-1].doc_id, principal_id=principal.id, listing=LISTING) if more else None
    return DocumentList(documents=docs, next_cursor=next_cursor, request_id=ctx.request_id)


@router.delete("/documents/{doc_id}", response_model=DeleteResult)
async def delete_document(doc_id: Annotated[str, Path(min_length=1, max_length=512)], call: AdminCall) -> DeleteResult:
    principal, c, ctx = call.principal, call.components, call.ctx
    record = await asyncio.to_thread(c.index.get_document, doc_id)
    acl = principal.acl()
    # An admin deletes only what its own groups can see; anything else is a
    # 404, so the endpoint is not an existence oracle for other groups' documents.
    if record is None or acl.allows_nothing or not set(record.acl_groups) & set(acl.labels):
        ctx.outcome = "not_found"
        raise ApiError(404, "document not found")
    if record.status in ("parsing", "embedding"):
        # The upload worker is writing it: deleting now would leave its final record behind.
        ctx.outcome = "conflict"
        raise ApiError(409, "the document is being indexed; delete it once its status is final")
    deleted = await asyncio.to_thread(c.index.delete_document, doc_id)
    ctx.doc_ids = [doc_id]
    ctx.outcome = "deleted"
    return DeleteResult(doc_id=doc_id, deleted_chunks=deleted, request_id=ctx.request_id)
