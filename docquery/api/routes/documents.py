"""``GET /v1/documents`` (what the caller may see) and ``DELETE /v1/documents/{doc_id}`` (admin)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path

from docquery.api.deps import AdminCall, QueryCall
from docquery.api.errors import ApiError
from docquery.api.schemas import DeleteResult, DocumentInfo, DocumentList

router = APIRouter(prefix="/v1")


@router.get("/documents", response_model=DocumentList)
async def list_documents(call: QueryCall) -> DocumentList:
    principal, c, ctx = call.principal, call.components, call.ctx
    # The ACL filter goes into the index query itself, from the verified principal.
    records = await asyncio.to_thread(c.index.list_documents, acl=principal.acl())
    ctx.doc_ids = [r.doc_id for r in records]
    ctx.outcome = "listed"
    # No acl_groups or ingest root in the listing: a shared document would
    # reveal the names of groups the caller is not in.
    # Every string here comes from the index, i.e. from a document or its file name: made
    # safe like citation fields (a UI may render them as markdown).
    label = c.pipeline.sanitizer.label
    docs = [
        DocumentInfo(
            doc_id=label(r.doc_id),
            source=label(r.source),
            title=label(r.title),
            chunk_count=r.chunk_count,
            ingested_at=label(r.ingested_at),
            status=label(r.status),
        )
        for r in records
    ]
    return DocumentList(documents=docs, request_id=ctx.request_id)


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
    deleted = await asyncio.to_thread(c.index.delete_document, doc_id)
    ctx.doc_ids = [doc_id]
    ctx.outcome = "deleted"
    return DeleteResult(doc_id=doc_id, deleted_chunks=deleted, request_id=ctx.request_id)
