"""The upload worker: a bounded queue of spooled documents, processed on ``uploads.concurrency`` threads.

The processor (ingest's pipeline) comes from the ``docquery.workers`` entry point ``upload``, so this
package never imports ``ingest`` (docs/design.md, "Uploads"). Each state change is written to the
document's record before it is acted on, and audited: ``parsing`` before the file is read, ``embedding``
by the pipeline before its first chunk, the final state last. At start, records a stopped process left
unfinished are taken up again: ``parsing`` and ``embedding`` become ``interrupted`` and are queued
again from their spool file, or ``failed`` when that file is gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from importlib.metadata import entry_points

from docquery.api.audit import AuditLog
from docquery.api.limits import RateLimiter
from docquery.api.uploads.spool import Spool
from docquery.core.domain import FINAL_STATES, UNFINISHED_STATES, DocumentRecord, DocumentStatus
from docquery.core.ports import IndexAdapter, UploadProcessor, UploadProcessorFactory
from docquery.core.uploads import (
    EXTRA_BYTES,
    EXTRA_CORPUS_PATH,
    EXTRA_JOB,
    EXTRA_NAME,
    EXTRA_REASON,
    EXTRA_SPOOL,
    EXTRA_UPLOADER,
    UploadOutcome,
    UploadTask,
    is_upload,
)

log = logging.getLogger("docquery.uploads")
WORKER_GROUP = "docquery.workers"
GONE = "the uploaded file is no longer in the spool; upload it again"
AUDIT_ROUTE = "upload-worker"
BATCH = 32  # documents one pipeline run takes from the queue at most


def processor_factory() -> UploadProcessorFactory | None:
    """The ``upload`` entry point's factory, or None when no installed package contributes one."""
    for ep in entry_points(group=WORKER_GROUP, name="upload"):
        factory: UploadProcessorFactory = ep.load()
        return factory
    return None


def is_worker_record(record: DocumentRecord) -> bool:
    """A record the worker owns: written by an upload (or a CLI hand-over), with a spool file."""
    return EXTRA_JOB in record.extra and EXTRA_SPOOL in record.extra


def task_of(record: DocumentRecord, spool: Spool) -> UploadTask | None:
    """The task a record describes; None when its spool file is not there."""
    extra = record.extra
    path = spool.path_of(extra.get(EXTRA_SPOOL, ""))
    if path is None or not path.is_file():
        return None
    corpus = extra.get(EXTRA_CORPUS_PATH)
    return UploadTask(
        doc_id=record.doc_id,
        job_id=extra[EXTRA_JOB],
        name=extra.get(EXTRA_NAME, path.name),
        spool_file=path,
        acl_groups=tuple(record.acl_groups),
        root=record.root,
        uploader=extra.get(EXTRA_UPLOADER, ""),
        size=int(extra.get(EXTRA_BYTES, "0") or 0),
        corpus_path=corpus,
        corpus_root=record.root if corpus else None,
    )


class UploadWorker:
    def __init__(
        self,
        *,
        processor: UploadProcessor,
        index: IndexAdapter,
        spool: Spool,
        audit: AuditLog,
        queue: int,
        concurrency: int,
        retention_s: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.processor, self.index, self.spool, self.audit = processor, index, spool, audit
        self.retention_s, self.clock = retention_s, clock
        self.limit = queue
        self.concurrency = concurrency
        self._pending: deque[UploadTask] = deque()
        self._active = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- admission ---------------------------------------------------------------------------------
    def room(self) -> int:
        """Documents that may still be queued (waiting and in progress count against the limit)."""
        with self._cond:
            return max(0, self.limit - len(self._pending) - self._active)

    def submit(self, tasks: list[UploadTask]) -> None:
        with self._cond:
            self._pending.extend(tasks)
            self._cond.notify_all()

    def waiting(self) -> int:
        with self._cond:
            return len(self._pending) + self._active

    def drain(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or in progress; False when ``timeout_s`` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._active, timeout_s)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        self.recover()
        for i in range(self.concurrency):
            thread = threading.Thread(target=self._run, name=f"upload-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.retention_s:
            thread = threading.Thread(target=self._expire_now_and_then, name="upload-retention", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _expire_now_and_then(self) -> None:
        while not self._stop.is_set():
            try:
                self.expire()
            except Exception as exc:  # the index failed: the next round tries again
                log.error("uploads: retention sweep stopped on %s", type(exc).__name__)
            self._stop.wait(min(3600.0, max(1.0, self.retention_s / 10)))

    def expire(self) -> int:
        """Delete uploaded documents last uploaded more than ``retention_s`` ago; returns how many."""
        cutoff = self.clock() - self.retention_s
        expired = 0
        for record in self.index.list_documents():
            if not (is_upload(record) and record.status in FINAL_STATES):
                continue
            try:
                uploaded = datetime.fromisoformat(record.ingested_at).timestamp()
            except ValueError:
                continue  # no time to judge by: kept
            if uploaded < cutoff:
                self.index.delete_document(record.doc_id)
                self._audit(record.doc_id, record.extra.get(EXTRA_UPLOADER, ""), "expired", "", "")
                expired += 1
        return expired

    def stop(self) -> None:
        """Stops after the documents in progress reach a point where they can be taken up again."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        self.processor.close()

    def recover(self) -> None:
        """Take up what a stopped process left unfinished, in the order it was queued (by job, then name)."""
        left = [r for r in self.index.list_documents() if is_worker_record(r) and r.status in UNFINISHED_STATES]
        left.sort(key=lambda r: (r.extra.get(EXTRA_JOB, ""), r.extra.get(EXTRA_SPOOL, "")))
        tasks: list[UploadTask] = []
        for found in left:
            record = self._set(found, "interrupted") if found.status in ("parsing", "embedding") else found
            task = task_of(record, self.spool)
            if task is None:
                self._fail(record, "failed", GONE)
            else:
                tasks.append(task)
        kept = {t.job_id for t in tasks}
        swept = self.spool.sweep(kept)
        if tasks or swept:
            log.info(
                "uploads: %d documents queued again after a restart; %d stale spool folders removed", len(tasks), swept
            )
        self.submit(tasks)

    # -- work ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                # What waits, in one pipeline run: one parse process, embed calls across documents.
                batch = [self._pending.popleft() for _ in range(min(BATCH, len(self._pending)))]
                self._active += len(batch)
            try:
                self._handle(batch)
            except Exception as exc:  # the index failed: the records stay unfinished, and the next start retries
                log.error("uploads: %d documents stopped on %s; taken up at next start", len(batch), type(exc).__name__)
            finally:
                with self._cond:
                    self._active -= len(batch)
                    self._cond.notify_all()

    def _handle(self, batch: list[UploadTask]) -> None:
        live: list[tuple[UploadTask, DocumentRecord]] = []
        for task in batch:
            record = self.index.get_document(task.doc_id)
            if record is None or record.extra.get(EXTRA_JOB) != task.job_id:
                # Deleted, or uploaded again since: that upload's task does the work.
                self.spool.remove_file(_rel(task, self.spool))
                continue
            live.append((task, self._set(record, "parsing")))
        if not live:
            return
        outcomes = self.processor.process([task for task, _ in live], self._stop)
        for (task, record), outcome in zip(live, outcomes, strict=True):
            self._settle(task, record, outcome)

    def _settle(self, task: UploadTask, record: DocumentRecord, outcome: UploadOutcome) -> None:
        if outcome.status == "interrupted":
            current = self.index.get_document(task.doc_id) or record
            self._set(current, "interrupted")
            return  # the spool file stays: the next start queues it again
        if outcome.status in ("failed", "skipped"):
            self._fail(record, outcome.status, outcome.reason)
            return
        final = self.index.get_document(task.doc_id)
        self._audit(task.doc_id, task.uploader, outcome.status, outcome.reason, task.job_id)
        if final is not None and outcome.reason and final.extra.get(EXTRA_REASON) != outcome.reason:
            self.index.put_document(replace(final, extra={**final.extra, EXTRA_REASON: outcome.reason}))
        self.spool.remove_file(_rel(task, self.spool))

    def _set(self, record: DocumentRecord, status: DocumentStatus) -> DocumentRecord:
        updated = replace(record, status=status)
        self.index.put_document(updated)
        self._audit(record.doc_id, record.extra.get(EXTRA_UPLOADER, ""), status, "", record.extra.get(EXTRA_JOB, ""))
        return updated

    def _fail(self, record: DocumentRecord, status: DocumentStatus, reason: str) -> None:
        # A replaced version goes with the upload that failed to replace it: its chunks would otherwise stay
        # searchable under an ACL the record no longer shows.
        self.index.delete_chunks(record.doc_id)
        extra = {**record.extra, EXTRA_REASON: reason}
        self.index.put_document(replace(record, status=status, chunk_count=0, content_sha256="", extra=extra))
        self._audit(record.doc_id, extra.get(EXTRA_UPLOADER, ""), status, reason, extra.get(EXTRA_JOB, ""))
        self.spool.remove_file(extra.get(EXTRA_SPOOL, ""))

    def _audit(self, doc_id: str, uploader: str, status: str, reason: str, job_id: str) -> None:
        """A state change (or ``expired``: deleted past the retention time), as an audit record."""
        detail = {"job_id": job_id, "status": status} | ({"reason": reason} if reason else {})
        self.audit.record(
            request_id=job_id,
            principal=uploader or None,
            method="WORKER",
            route=AUDIT_ROUTE,
            status=0,
            outcome=f"status:{status}",
            doc_ids=[doc_id],
            detail=detail,
        )


@dataclass(frozen=True)
class Uploads:
    """What the upload routes need, on ``app.state.uploads`` while the worker runs."""

    worker: UploadWorker
    spool: Spool
    limiter: RateLimiter


def _rel(task: UploadTask, spool: Spool) -> str:
    return task.spool_file.relative_to(spool.root).as_posix()
