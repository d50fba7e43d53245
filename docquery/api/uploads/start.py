"""Starting the upload worker with the service (the app's lifespan), and the bound on an upload's body."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from docquery.api.limits import RateLimiter
from docquery.api.uploads.multipart import MAX_HEADER_BYTES
from docquery.api.uploads.receive import MAX_CORPUS_BYTES, MAX_TEXT_BYTES, TEXT_FIELDS
from docquery.api.uploads.spool import Spool, spool_root
from docquery.api.uploads.worker import Uploads, UploadWorker, processor_factory
from docquery.config.settings import Settings, UploadSettings
from docquery.core.ports import UploadProcessorFactory
from docquery.wiring import Components

log = logging.getLogger("docquery.uploads")


def upload_body_bound(cfg: UploadSettings) -> int:
    """The most an upload's body can hold that is not refused part by part: a declared length past it is 413."""
    parts = cfg.max_files + len(TEXT_FIELDS)
    framing = parts * (MAX_HEADER_BYTES + 512)  # each part's headers and delimiter
    fields = (len(TEXT_FIELDS) - 1) * MAX_TEXT_BYTES + MAX_CORPUS_BYTES
    return framing + fields + cfg.max_files * cfg.max_file_bytes


def start_uploads(
    app: FastAPI, settings: Settings, components: Components, factory: UploadProcessorFactory | None
) -> UploadWorker | None:
    """The running worker, on ``app.state.uploads``; None when uploads are off or no processor is installed."""
    cfg = settings.uploads
    if not cfg.enabled:
        return None
    factory = factory or processor_factory()
    if factory is None:
        log.warning("uploads: no upload processor is installed (the ingest package); POST /v1/documents answers 503")
        return None
    index = components.index
    spool = Spool(spool_root(settings, index.name), cfg.max_name_bytes)
    processor = factory(settings, index, components.embedder)
    worker = UploadWorker(
        processor=processor,
        index=index,
        spool=spool,
        audit=app.state.audit,
        queue=cfg.queue,
        concurrency=cfg.concurrency,
        retention_s=cfg.retention_s,
    )
    worker.start()
    app.state.uploads = Uploads(worker, spool, RateLimiter(cfg.rate_limit_per_minute, cfg.rate_limit_burst))
    return worker
