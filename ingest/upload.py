"""The upload processor: one spooled file through the CLI's pipeline, inside ``docquery serve``.

The service finds ``build`` through the ``docquery.workers`` entry point ``upload`` (pyproject.toml) and hands
it its own index and embedder, so only ``serve`` writes the embedded engine's data dir. A document goes
through exactly the stages an ingested file does (``ingest.write.stream``): the parse process for parsed
formats, the hidden-text, injection and secret scans, quarantine, sentence chunks, embedding in small calls,
and the crash-safe write order, with ``embedding`` as its record's state while its chunks are written.

The type is decided by the content: a PDF header, a ZIP container named ``.docx``, or text (read by its
suffix when that is a text format, else as HTML or plain text by what it opens with); anything else is
skipped with the reason.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from docquery import validation
from docquery.chunking import SentenceChunker, tokenizer_for
from docquery.config.settings import Settings
from docquery.core.domain import DocumentRecord
from docquery.core.ports import Embedder, IndexAdapter
from docquery.core.uploads import UploadOutcome, UploadTask
from docquery.embedders.local import use_threads
from ingest.model import EXTRA_ACL_ORIGIN, EXTRA_FLAGS, EXTRA_PATH, FileRejected, PlannedDoc, PreparedDoc, SourceFile
from ingest.pipeline import pipeline_fingerprint
from ingest.prepare.document import PrepareConfig, prepare
from ingest.prepare.loaders import SNIFF_BYTES, TEXT_KINDS, Limits, looks_like_html, precheck, sniffs_as_text
from ingest.prepare.loaders.docx import OLE_MAGIC
from ingest.prepare.loaders.pdf import PDF_MAGIC
from ingest.prepare.parsing import ParseMode, Standby
from ingest.report.progress import NullProgress
from ingest.report.summary import Report
from ingest.write.stream import StreamConfig, index_documents

ZIP_MAGIC = b"PK\x03\x04"
UPLOAD_ORIGIN = "upload"
EXTRA_HELD = "quarantined_chunks"  # how many of the document's chunks the scan held out of search
GONE = "the uploaded file is no longer in the spool; upload it again"
# The parse process's niceness: on a core it shares with the service's queries, they go first.
PARSE_NICE = 10


# What the previous version's record said that the new one decides again.
_PER_VERSION = (EXTRA_FLAGS, EXTRA_HELD, "reason")


def upload_kind(name: str, head: bytes) -> str:
    """The loader for an uploaded file, by its first bytes (then its suffix); raises FileRejected (a skip)."""
    suffix = Path(name).suffix.lower()
    if PDF_MAGIC in head[:1024]:
        return ".pdf"
    if head.startswith(ZIP_MAGIC):
        if suffix == ".docx":
            return ".docx"
        raise FileRejected("unsupported file type (a ZIP archive not named .docx)")
    if head.startswith(OLE_MAGIC):
        raise FileRejected("unsupported file type (a legacy or encrypted Office document)")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or sniffs_as_text(head):
        if suffix in TEXT_KINDS:
            return suffix
        return ".html" if looks_like_html(head) else ".txt"
    raise FileRejected("unsupported file type (the content is not text, PDF or DOCX)")


def prepare_upload(
    planned: PlannedDoc, chunker: SentenceChunker, cfg: PrepareConfig, meta: dict[str, tuple[str, dict[str, str]]]
) -> PreparedDoc:
    """``prepare``, then the record as the upload keeps it: ``meta`` gives each document's root and extra keys
    (module level: it pickles for the parse process)."""
    prepared = prepare(planned, chunker, cfg)
    root, extra = meta[planned.doc_id]
    # The path prepare records is the spool file's; a corpus document's own path comes in ``extra``.
    kept = {k: v for k, v in prepared.record.extra.items() if k != EXTRA_PATH}
    if any(prepared.quarantined):
        kept[EXTRA_HELD] = str(sum(prepared.quarantined))
    record: DocumentRecord = replace(prepared.record, root=root, extra=kept | extra)
    return replace(prepared, record=record)


def _hash(path: Path) -> tuple[bytes, str]:
    """The file's first bytes and its SHA-256, read once."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        head = os.read(fd, SNIFF_BYTES)
        h.update(head)
        while block := os.read(fd, 1 << 20):
            h.update(block)
    finally:
        os.close(fd)
    return head, h.hexdigest()


def _check(task: UploadTask) -> UploadOutcome | tuple[str, str]:
    """The file's loader and SHA-256, or how it ends before any parsing: skipped (a type no loader reads) or
    failed (a header its loader refuses, such as a .pdf without %PDF; a spool file that is gone)."""
    try:
        head, sha = _hash(task.spool_file)
    except OSError:
        return UploadOutcome("failed", GONE)
    try:
        kind = upload_kind(task.name, head)
    except FileRejected as exc:
        return UploadOutcome("skipped", exc.reason)
    try:
        precheck(kind, head)
    except FileRejected as exc:
        return UploadOutcome("failed", exc.reason)
    return kind, sha


class UploadIngest:
    def __init__(self, settings: Settings, index: IndexAdapter, embedder: Embedder) -> None:
        self.settings, self.index, self.embedder = settings, index, embedder
        self.spec = validation.chunk_spec(settings)
        self.fingerprint = pipeline_fingerprint(self.spec, settings.ingest.quarantine_flagged)
        up, ing = settings.uploads, settings.ingest
        threads = up.threads
        # Every file to the parse process (unless it is off): chunking a text file here would hold the
        # service's GIL against its queries, and load the sentence splitter (llama-index, NLTK) into it.
        parse: ParseMode = "off" if ing.parse_process == "off" else "all"
        # One parse process started ahead of the next batch (its imports take seconds); every batch still gets
        # a process of its own. Started by its own thread, so it lives as long as this processor.
        self.standby = Standby(nice=PARSE_NICE) if up.parse_ahead and parse == "all" else None
        if self.standby is not None:
            self.standby.refill()
        self.stream_cfg = StreamConfig(
            embed_batch=up.embed_batch,
            upsert_batch=ing.upsert_batch,
            first_batch=min(32, up.embed_batch),
            parse_process=parse,
            parse_timeout_s=ing.parse_timeout_s,
            standby=self.standby,
            writing_status="embedding",
            thread_init=lambda: use_threads(threads),
        )
        self.limits = Limits(max_file_bytes=up.max_file_bytes, max_expanded_bytes=ing.max_expanded_bytes)
        self._chunker: SentenceChunker | None = None
        self._lock = threading.Lock()

    def chunker(self) -> SentenceChunker:
        with self._lock:  # the tokenizer loads the model once, on the first upload
            if self._chunker is None:
                self._chunker = SentenceChunker(tokenizer_for(self.embedder), self.spec)
            return self._chunker

    def ready(self) -> bool:
        """The next batch starts without waiting for a parse process's imports."""
        return self.standby is None or self.standby.ready()

    def process(self, tasks: Sequence[UploadTask], stop: threading.Event) -> list[UploadOutcome]:
        """One pipeline run for the batch (one parse process, embed calls across its documents)."""
        outcomes: dict[str, UploadOutcome] = {}
        planned: list[PlannedDoc] = []
        meta: dict[str, tuple[str, dict[str, str]]] = {}
        for task in tasks:
            checked = _check(task)
            if isinstance(checked, UploadOutcome):
                outcomes[task.doc_id] = checked
                continue
            kind, sha = checked
            doc, root, extra = self._planned(task, kind, sha)
            planned.append(doc)
            meta[task.doc_id] = (root, extra)
        if planned:
            try:
                self._index(planned, meta, stop, outcomes)
            finally:
                if self.standby is not None:
                    self.standby.refill()  # after the batch: its imports do not compete with the batch's work
        return [outcomes[t.doc_id] for t in tasks]

    def _index(
        self,
        planned: list[PlannedDoc],
        meta: dict[str, tuple[str, dict[str, str]]],
        stop: threading.Event,
        outcomes: dict[str, UploadOutcome],
    ) -> None:
        cfg = PrepareConfig(
            limits=self.limits,
            quarantine_flagged=self.settings.ingest.quarantine_flagged,
            pipeline_fingerprint=self.fingerprint,
            ingested_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        report = Report()
        work = partial(prepare_upload, chunker=self.chunker(), cfg=cfg, meta=meta)
        interrupted = False
        try:
            index_documents(
                planned,
                prepare=work,
                embedder=self.embedder,
                index=self.index,
                cfg=self.stream_cfg,
                report=report,
                progress=NullProgress(),
                interrupt=stop,
            )
        except KeyboardInterrupt:
            interrupted = True
        failed = {f["path"]: f["reason"] for f in report.failed}
        for doc in planned:
            reason = failed.get(str(doc.source.path))
            if reason is not None:
                outcomes[doc.doc_id] = UploadOutcome("failed", reason)
            else:
                outcomes[doc.doc_id] = self._final(doc.doc_id, interrupted)

    def _final(self, doc_id: str, interrupted: bool) -> UploadOutcome:
        final = self.index.get_document(doc_id)
        if final is None or final.status not in ("indexed", "quarantined"):
            if interrupted:
                return UploadOutcome("interrupted")
            return UploadOutcome("failed", "the document was deleted while it was indexed")
        reason = ""
        if final.status == "quarantined":
            held, flags = final.extra.get(EXTRA_HELD, "?"), final.extra.get(EXTRA_FLAGS, "")
            reason = f"{held} of {final.chunk_count} chunks held out of search by the scan ({flags})"
        return UploadOutcome(final.status, reason, final.chunk_count)

    def _planned(self, task: UploadTask, kind: str, sha: str) -> tuple[PlannedDoc, str, dict[str, str]]:
        previous = self.index.get_document(task.doc_id)
        kept = dict(previous.extra) if previous is not None else {}
        if task.corpus_path and task.corpus_root:
            # A corpus document sent by the CLI: cited, recorded and planned as a direct run would.
            root, path = Path(task.corpus_root), Path(task.corpus_path)
            src_root, rel = root, path.relative_to(root).as_posix()
            extra = {k: v for k, v in kept.items() if k not in _PER_VERSION} | {EXTRA_PATH: str(path)}
            record_root = str(root)
        else:
            src_root, rel = Path("/"), task.name  # the root's empty name: the citation is the file name alone
            extra = {k: v for k, v in kept.items() if k not in (*_PER_VERSION, EXTRA_PATH)}
            record_root = task.root
        extra[EXTRA_ACL_ORIGIN] = UPLOAD_ORIGIN
        source = SourceFile(
            root=src_root,
            path=task.spool_file,
            rel=rel,
            acl_groups=task.acl_groups,
            acl_origin=UPLOAD_ORIGIN,
            kind=kind,
        )
        planned = PlannedDoc(source=source, doc_id=task.doc_id, content_sha256=sha, previous=previous)
        return planned, record_root, extra

    def close(self) -> None:
        """The parse process started ahead; the index and the embedder are the service's."""
        if self.standby is not None:
            self.standby.close()


def build(settings: Any, index: IndexAdapter, embedder: Embedder) -> UploadIngest:
    """The ``docquery.workers`` entry point ``upload``."""
    return UploadIngest(settings, index, embedder)
