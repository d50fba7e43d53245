"""``GET /v1/passages/{doc_id}/{chunk_index}``: a cited passage, for a reader who wants to check a quote.

Only a chunk the caller may read is found: the ACL filter is part of the index query. A passage of
another group's document, a quarantined chunk and one that does not exist all get the same 404.
The passage comes in its document context: the text of its neighbouring chunks before and after
it, cut where the passage starts and ends (chunks overlap), when the offsets say where that is.
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
from docquery.core.domain import Chunk

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
    before: str = Field(description="The document's text just before the passage (its previous chunk), or empty")
    after: str = Field(description="The document's text just after the passage (its next chunk), or empty")
    request_id: str


@router.get("/passages/{doc_id}/{chunk_index}", response_model=Passage)
async def passage(
    doc_id: Annotated[str, Path(min_length=1, max_length=512)],
    chunk_index: Annotated[int, Path(ge=0, le=10_000_000)],
    call: QueryCall,
) -> Passage:
    c, ctx = call.components, call.ctx
    wanted = [chunk_index - 1, chunk_index, chunk_index + 1]
    found = await asyncio.to_thread(c.index.read_passages, doc_id, wanted, call.principal.acl())
    chunk = found.get(chunk_index)
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
        before=sanitizer(_before(found.get(chunk_index - 1), chunk)),
        after=sanitizer(_after(found.get(chunk_index + 1), chunk)),
        request_id=ctx.request_id,
    )


def _before(previous: Chunk | None, chunk: Chunk) -> str:
    """The previous chunk's text up to where ``chunk`` starts (code points), when both are placed in one section."""
    if previous is None or previous.section != chunk.section or None in (previous.char_start, chunk.char_start):
        return ""
    cut = (chunk.char_start or 0) - (previous.char_start or 0)
    return previous.text[:cut] if 0 < cut <= len(previous.text) else ""


def _after(following: Chunk | None, chunk: Chunk) -> str:
    """The next chunk's text from where ``chunk`` ends."""
    if following is None or following.section != chunk.section or None in (following.char_start, chunk.char_end):
        return ""
    cut = (chunk.char_end or 0) - (following.char_start or 0)
    return following.text[cut:] if 0 <= cut < len(following.text) else ""
