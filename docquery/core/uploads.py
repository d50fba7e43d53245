"""What the service and the upload worker agree on: the task, its outcome, and how uploads are recorded.

An uploaded document is an ordinary document record (``kind = document``) whose ``root`` is
``upload:`` and a digest of the uploader's tenant, so a tenant's uploads are one lookup on an indexed
key; its ``extra`` keeps the job, the uploader, the sending tenant's digest, the name, the size, the spool
file and, in a final state, the reason. Its id is keyed like a corpus document's, from (tenant, file
name), in a namespace of its own: no upload can take a corpus document's id. A corpus document the CLI
hands over keeps its corpus id and root, and the same ``extra``: a tenant's quota counts both.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from docquery.core.domain import DocumentRecord, DocumentStatus

UPLOAD_ROOT_PREFIX = "upload:"
# Keys of an uploaded document record's ``extra``.
EXTRA_JOB = "job"
EXTRA_UPLOADER = "uploader"
EXTRA_TENANT = "tenant"  # the sending tenant's digest (tenant_key), on uploads and hand-overs alike
EXTRA_NAME = "name"
EXTRA_BYTES = "bytes"
EXTRA_SPOOL = "spool"  # the spool file, relative to the spool folder
EXTRA_REASON = "reason"  # why a document is failed, skipped or quarantined; never its content
# A corpus document sent by the CLI: the path its id derives from (the key ingest's plan reads as well).
EXTRA_CORPUS_PATH = "path"


def tenant_key(tenant: str) -> str:
    """What a record keeps of a tenant: a digest, so the tenant's name is not stored in the clear."""
    return hashlib.sha256(f"tenant\x1f{tenant}".encode()).hexdigest()[:32]


def tenant_root(tenant: str) -> str:
    """The ``root`` of a tenant's uploaded records."""
    return UPLOAD_ROOT_PREFIX + tenant_key(tenant)


def is_upload(record: DocumentRecord) -> bool:
    return record.root.startswith(UPLOAD_ROOT_PREFIX)


def upload_document_id(tenant: str, name: str, key: bytes | None) -> str:
    """An uploaded document's id: keyed by the collection's doc-id key, like ``collection.document_id``, with
    other material (``upload``, not ``file``), so it never equals a corpus document's."""
    material = f"upload\x1f{tenant}\x1f{name}".encode()
    if key is None:
        return hashlib.sha256(material).hexdigest()[:32]
    return hmac.new(key, material, hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class UploadTask:
    """One spooled file to index as ``doc_id`` (its queued record is already written)."""

    doc_id: str
    job_id: str
    name: str  # checked by docquery.validation.upload_file_name
    spool_file: Path
    acl_groups: tuple[str, ...]
    root: str
    uploader: str
    size: int
    # A corpus document sent by the CLI: the resolved path and ingest root its id and citation derive from.
    corpus_path: str | None = None
    corpus_root: str | None = None


@dataclass(frozen=True)
class UploadOutcome:
    """How a task ended. For ``indexed`` and ``quarantined`` the worker has written the final record;
    for ``failed`` and ``skipped`` the service writes it, with ``reason``."""

    status: DocumentStatus
    reason: str = ""
    chunks: int = 0
