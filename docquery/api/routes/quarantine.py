"""``GET /v1/admin/quarantine`` (admin): the quarantined chunks an operator may judge and release.

Each item says where a chunk sits (document, heading path, chunk index) and which rules held it,
never its text: the text is what the injection or secret scan objected to, so the service does not
echo it, and the operator reads the source where the item points. Paged like ``/v1/documents``: the
cursor is the next page's first point id, sealed for the caller and this listing (docquery.api.cursors).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from docquery.api.cursors import CursorSealer
from docquery.api.deps import AdminCall
from docquery.api.routes.documents import DEFAULT_PAGE, MAX_PAGE, cursor_query, resume_after
from docquery.rag.citation_fields import plain_field

router = APIRouter(prefix="/v1/admin")

LISTING = "quarantine"
_MAX_CURSOR_CHARS = 512  # a sealed point id is about 130 characters


class QuarantinedInfo(BaseModel):
    doc_id: str
    source: str = Field(description="The document's source path, plain text.")
    title: str = Field(description="The document's title, plain text.")
    page: str | None = Field(description="The chunk's heading path, plain text; null when it has none.")
    chunk_index: int = Field(description="The chunk's place in its document, from 0.")
    flags: list[str] = Field(description="Why the chunk was quarantined: the scan rules that matched.")


class QuarantineList(BaseModel):
    chunks: list[QuarantinedInfo]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")
    request_id: str


@router.get("/quarantine", response_model=QuarantineList)
async def list_quarantine(
    call: AdminCall,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Chunks per page.")] = DEFAULT_PAGE,
    cursor: Annotated[str | None, cursor_query(_MAX_CURSOR_CHARS)] = None,
    doc_id: Annotated[
        str | None, Query(min_length=1, max_length=512, description="Only this document's chunks.")
    ] = None,
) -> QuarantineList:
    principal, c, ctx = call.principal, call.components, call.ctx
    after = resume_after(call, cursor, LISTING)
    # An admin sees the quarantined chunks of the documents its own groups can see, as it deletes only those.
    found, position = await asyncio.to_thread(
        c.index.list_quarantined, acl=principal.acl(), after=after, limit=limit, doc_id=doc_id
    )
    ctx.doc_ids = list(dict.fromkeys(q.doc_id for q in found))
    ctx.chunk_ids = [q.id for q in found]
    ctx.outcome = "listed"
    label = c.pipeline.sanitizer.label
    chunks = [
        QuarantinedInfo(
            doc_id=label(q.doc_id),
            source=plain_field(q.source),
            title=plain_field(q.title),
            page=None if q.page is None else plain_field(q.page),
            chunk_index=q.chunk_index,
            flags=[plain_field(f) for f in q.flags],
        )
        for q in found
    ]
    sealer: CursorSealer = call.request.app.state.cursors
    next_cursor = None if position is None else sealer.seal(position, principal_id=principal.id, listing=LISTING)
    return QuarantineList(chunks=chunks, next_cursor=next_cursor, request_id=ctx.request_id)
