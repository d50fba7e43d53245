"""``GET /v1/passages/{doc_id}/{chunk_index}``: a cited passage, for a reader who wants to check a quote.

Only a chunk the caller may read is found: the ACL filter is part of the index query. A passage of
another group's document, a quarantined chunk and one that does not exist all get the same 404.
Every string is made safe as citation fields are (it comes from a document); the text keeps its
line breaks and is returned as it is stored when the sanitiser has nothing to change, so a
citation's offsets point into it.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from docquery.api.deps import QueryCall
from docquery.api.errors import ApiError

router = APIRouter(prefix="/v1")


class Passage(BaseModel):
    doc_id: str
    chunk_index: int
    title: str
    source: str
    page: str | None = Field(description="Page, or heading path, of the passage")
    section: int | None = Field(description="Number of the document section holding the passage")
    char_start: int | None = Field(description="Code-point offset of the passage in its section (as citations)")
    char_end: int | None = Field(description="End (exclusive) of the passage in its section")
    text: str = Field(description="The passage; a citation's snippet starts at char_start - this char_start")
    request_id: str


@router.get("/passages/{doc_id}/{chunk_index}", response_model=Passage)
async def passage(
    doc_id: Annotated[str, Path(min_length=1, max_length=512)],
    chunk_index: Annotated[int, Path(ge=0, le=10_000_000)],
    call: QueryCall,
) -> Passage:
    c, ctx = call.components, call.ctx
    chunk = await asyncio.to_thread(c.index.read_passage, doc_id, chunk_index, call.principal.acl())
    if chunk is None:
        ctx.outcome = "not_found"
        raise ApiError(404, "passage not found")
    ctx.doc_ids, ctx.chunk_ids, ctx.outcome = [chunk.doc_id], [chunk.id], "read"
    sanitizer = c.pipeline.sanitizer
    label = sanitizer.label
    return Passage(
        doc_id=label(chunk.doc_id),
        chunk_index=chunk.chunk_index,
        title=label(chunk.title),
        source=label(chunk.source),
        page=None if chunk.page is None else label(chunk.page),
        section=chunk.section,
        char_start=chunk.char_start,
        char_end=chunk.char_end,
        text=sanitizer(chunk.text),
        request_id=ctx.request_id,
    )
