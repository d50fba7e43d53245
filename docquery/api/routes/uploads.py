"""``POST /v1/documents`` (upload), ``GET /v1/documents/{doc_id}`` (a document's status) and
``GET /v1/ingest/jobs/{job_id}`` (a batch's counts). The rules are in docquery.api.uploads.rules; the
body is read by docquery.api.uploads.receive, and the work is the worker's (docs/api.md, "Uploads")."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, Path

from docquery.api.deps import Call, IngestCall, StatusCall
from docquery.api.errors import ApiError
from docquery.api.schemas import DocumentStatusInfo, JobDocument, JobStatus, UploadAccepted, UploadedDocument
from docquery.api.uploads.handover import corpus_files
from docquery.api.uploads.receive import Received, receive
from docquery.api.uploads.rules import check_quota, check_replace, granted_acl, held_by, may_see, tenant_of
from docquery.api.uploads.worker import Uploads
from docquery.core.collection import document_id
from docquery.core.domain import DOCUMENT_STATES, FINAL_STATES, DocumentRecord
from docquery.core.uploads import (
    EXTRA_BYTES,
    EXTRA_CORPUS_PATH,
    EXTRA_JOB,
    EXTRA_NAME,
    EXTRA_REASON,
    EXTRA_SPOOL,
    EXTRA_TENANT,
    EXTRA_UPLOADER,
    UploadTask,
    is_upload,
    tenant_key,
    tenant_root,
    upload_document_id,
)
from docquery.rag.citation_fields import plain_field

router = APIRouter(prefix="/v1")
UNAVAILABLE = "uploads are not available on this service (DOCQUERY_UPLOADS__ENABLED, or the ingest package)"


def _uploads(call: Call) -> Uploads:
    found: Uploads | None = getattr(call.request.app.state, "uploads", None)
    if found is None:
        raise ApiError(503, UNAVAILABLE, type_="unavailable", headers={"Retry-After": "60"})
    return found


def _full(wait_s: float = 5.0) -> ApiError:
    return ApiError(
        503,
        "the upload queue is full; retry later",
        type_="unavailable",
        headers={"Retry-After": str(math.ceil(wait_s))},
    )


# The body is read by hand, as it streams in (docquery.api.uploads.receive), so its schema is declared here.
_UPLOAD_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["files"],
                "properties": {
                    "files": {
                        "type": "array",
                        "items": {"type": "string", "format": "binary"},
                        "description": "One part per file, with its file name (at most DOCQUERY_UPLOADS__MAX_FILES).",
                    },
                    "groups": {"type": "string", "description": "Comma-separated groups that may read the files."},
                    "public": {"type": "string", "enum": ["true", "false"], "description": "true needs admin."},
                    "corpus": {
                        "type": "string",
                        "description": "Sent by `docquery ingest --server`: a JSON list of {path, root}, one per file.",
                    },
                },
            }
        }
    },
}


@router.post("/documents", status_code=202, response_model=UploadAccepted, openapi_extra={"requestBody": _UPLOAD_BODY})
async def upload(call: IngestCall) -> UploadAccepted:
    principal, ctx, settings = call.principal, call.ctx, call.settings
    up = _uploads(call)
    wait = up.limiter.take(principal.id)  # before anything is read: a refused upload counts too
    if wait is not None:
        ctx.outcome = "rate_limited"
        after = max(1, math.ceil(wait))
        cfg = settings.uploads
        raise ApiError(
            429,
            f"upload rate limit ({cfg.rate_limit_per_minute} requests/minute, burst {cfg.rate_limit_burst}, "
            f"refused ones included) reached; retry in {after} s",
            headers={"Retry-After": str(after)},
        )
    if up.worker.room() == 0:
        ctx.outcome = "queue_full"
        raise _full()
    got = await receive(call.request.stream(), call.request.headers.get("content-type"), up.spool, settings.uploads)
    try:
        accepted = await _accept(call, up, got)
    except BaseException:
        up.spool.remove_job(got.job_id)
        raise
    ctx.doc_ids = [t.doc_id for t in accepted]
    ctx.outcome = "accepted"
    ctx.audit_detail = {
        "job_id": got.job_id,
        "acl": list(accepted[0].acl_groups),
        "files": len(accepted),
        "bytes": sum(t.size for t in accepted),
    }
    up.worker.submit(accepted)
    return UploadAccepted(
        job_id=got.job_id,
        documents=[UploadedDocument(doc_id=t.doc_id, name=t.name, status="queued") for t in accepted],
        request_id=ctx.request_id,
    )


async def _accept(call: Call, up: Uploads, got: Received) -> list[UploadTask]:
    """Every check on a received upload, then its queued records; raises ApiError with nothing written."""
    principal, index, cfg = call.principal, call.components.index, call.settings.uploads
    acl = granted_acl(principal, got.text.get("groups"), got.text.get("public"))
    if up.worker.room() < len(got.files):
        raise _full()
    tenant = tenant_of(principal)
    root = tenant_root(tenant)
    names = [f.name for f in got.files]
    corpus = corpus_files(got.text["corpus"], names) if "corpus" in got.text else None
    key = await asyncio.to_thread(index.ensure_doc_id_key)
    if corpus is None:
        ids = [upload_document_id(tenant, name, key) for name in names]
    else:
        ids = [document_id(PurePosixPath(c.path), key) for c in corpus]
    previous = await asyncio.to_thread(lambda: [index.get_document(i) for i in ids])
    for n, prev in enumerate(previous):
        check_replace(principal, prev, f"files[{n}]")
    held = await asyncio.to_thread(held_by, index, tenant)
    check_quota(cfg, held, {p.doc_id for p in previous if p is not None}, [f.size for f in got.files])
    now = datetime.now(UTC).isoformat(timespec="seconds")
    records: list[DocumentRecord] = []
    tasks: list[UploadTask] = []
    for n, (doc_id, f, prev) in enumerate(zip(ids, got.files, previous, strict=True)):
        extra = {
            EXTRA_JOB: got.job_id,
            EXTRA_UPLOADER: principal.id,
            EXTRA_TENANT: tenant_key(tenant),
            EXTRA_NAME: f.name,
            EXTRA_BYTES: str(f.size),
            EXTRA_SPOOL: f.rel,
        }
        where = corpus[n] if corpus is not None else None
        if where is not None:
            extra[EXTRA_CORPUS_PATH] = where.path
        records.append(
            DocumentRecord(
                doc_id=doc_id,
                source=where.cited_as if where else f.name,
                root=where.root if where else root,
                content_sha256=prev.content_sha256 if prev else "",
                chunk_count=prev.chunk_count if prev else 0,
                acl_groups=acl,
                title=prev.title if prev else f.name,
                ingested_at=now,
                status="queued",
                extra=extra,
            )
        )
        tasks.append(
            UploadTask(
                doc_id=doc_id,
                job_id=got.job_id,
                name=f.name,
                spool_file=up.spool.root / f.rel,
                acl_groups=acl,
                root=where.root if where else root,
                uploader=principal.id,
                size=f.size,
                corpus_path=where.path if where else None,
                corpus_root=where.root if where else None,
            )
        )
    await asyncio.to_thread(index.put_documents, records)  # durable before the 202
    return tasks


@router.get("/documents/{doc_id}", response_model=DocumentStatusInfo)
async def document_status(
    doc_id: Annotated[str, Path(min_length=1, max_length=512)], call: StatusCall
) -> DocumentStatusInfo:
    principal, ctx = call.principal, call.ctx
    record = await asyncio.to_thread(call.components.index.get_document, doc_id)
    if record is None or not may_see(principal, record):
        ctx.outcome = "not_found"  # the same answer whether it exists or not
        raise ApiError(404, "document not found")
    ctx.doc_ids = [doc_id]
    ctx.outcome = "status"
    label = call.components.pipeline.sanitizer.label
    return DocumentStatusInfo(
        doc_id=label(record.doc_id),
        source=plain_field(record.source),
        title=plain_field(record.title),
        status=record.status,
        reason=record.extra.get(EXTRA_REASON, "") if record.status not in ("indexed",) else "",
        job_id=record.extra.get(EXTRA_JOB),
        chunk_count=record.chunk_count,
        ingested_at=label(record.ingested_at),
        request_id=ctx.request_id,
    )


def _of_tenant(record: DocumentRecord, tenant: str) -> bool:
    """Sent by this tenant, uploaded or handed over; a record from before records kept their tenant: an upload by
    its root, a hand-over (its corpus root) by its readers alone."""
    recorded = record.extra.get(EXTRA_TENANT)
    if recorded is not None:
        return recorded == tenant_key(tenant)
    return record.root == tenant_root(tenant) or not is_upload(record)


@router.get("/ingest/jobs/{job_id}", response_model=JobStatus)
async def job_status(job_id: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")], call: StatusCall) -> JobStatus:
    principal, ctx = call.principal, call.ctx
    tenant = tenant_of(principal)
    found = await asyncio.to_thread(call.components.index.list_documents, extra=(EXTRA_JOB, job_id))
    mine = [r for r in found if _of_tenant(r, tenant) and may_see(principal, r)]
    mine.sort(key=lambda r: r.extra.get(EXTRA_SPOOL, ""))
    if not mine:
        ctx.outcome = "not_found"
        raise ApiError(404, "job not found")
    counts = dict.fromkeys(DOCUMENT_STATES, 0)
    for record in mine:
        counts[record.status] += 1
    ctx.doc_ids = [r.doc_id for r in mine]
    ctx.outcome = "status"
    return JobStatus(
        job_id=job_id,
        documents=[
            JobDocument(
                doc_id=r.doc_id,
                name=plain_field(r.extra.get(EXTRA_NAME, r.source)),
                status=r.status,
                reason=r.extra.get(EXTRA_REASON, "") if r.status != "indexed" else "",
            )
            for r in mine
        ],
        counts=counts,
        done=all(r.status in FINAL_STATES for r in mine),
        request_id=ctx.request_id,
    )
