"""The overlapped stages for documents that must be (re)indexed.

    caller thread (and     embed thread              write thread
    a parse process)
    prepare (load, scan,   batches chunks across     put pending record -> upsert
    chunk) one doc at a -> documents, embeds them -> in batches -> delete replaced
    time                   (the CPU bottleneck)      chunks -> put complete record

Bounded queues link the stages, so parsing runs ahead of embedding and upserts
never block it. The caller thread takes parsed documents from ``ingest.prepare.parsing``
and passes them on within a budget of *chunks*, two embed calls' worth: a bound
in documents let short documents (SciFact abstracts make 2.4 chunks each) fill
the queue with less than one call's worth, and the embedder then sat idle after
every call until the parser caught up. The first call is small, so the embedder
starts before a whole batch is parsed.

Per document the write order is what makes a killed run safe to re-run: the
record is marked ``pending`` before its first chunk is written, the new chunks
are written before the old ones are deleted (a concurrent query never finds the
document missing), and the ``complete`` record is written last. A re-run treats
a ``pending`` record as changed; point ids are deterministic, so it rewrites the
same points and deletes whatever else carries the doc id.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import TypeVar

from docquery.core.domain import DocumentRecord, DocumentStatus, IndexedChunk
from docquery.core.ports import Embedder, IndexAdapter
from ingest.model import PlannedDoc, PreparedDoc
from ingest.prepare.parse_child import Prepare
from ingest.prepare.parsing import ParseMode, Standby, isolated, routed
from ingest.report.progress import Progress
from ingest.report.summary import Report

log = logging.getLogger("ingest")
T = TypeVar("T")
_POLL_S = 0.05


@dataclass(frozen=True)
class StreamConfig:
    embed_batch: int = 1024  # chunks per embed call
    upsert_batch: int = 256  # points per upsert
    first_batch: int = 32  # the first embed call starts once this many chunks are ready
    # Which files are parsed in a process of their own (ingest.prepare.parsing). The pipeline passes the
    # setting (default "auto"); "off" here lets a caller's ``prepare`` be a closure, which never pickles.
    parse_process: ParseMode = "off"
    parse_timeout_s: float = 300.0  # a file still parsing after this fails (parse process only)
    standby: Standby | None = None  # a parse process started ahead (a service's), taken by the run
    queued_batches: int = 4  # embedded batches waiting for the writer
    min_partial_batch: int = 16  # embed a partial batch when the parser is behind
    # The record's state while its chunks are written: the CLI's "pending", an upload's "embedding".
    writing_status: DocumentStatus = "pending"
    # Run first on the embed thread (the upload worker bounds the model's threads there).
    thread_init: Callable[[], None] | None = None


@dataclass
class _Batch:
    items: list[tuple[PreparedDoc, IndexedChunk]]
    finished: list[PreparedDoc]


@dataclass
class _Open:
    prep: PreparedDoc
    left: int
    credit: int  # budget this document still holds, returned as its chunks are embedded


@dataclass
class _Shared:
    report: Report
    progress: Progress
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)
    failed_docs: set[str] = field(default_factory=set)

    def abort(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)
        self.stop.set()

    def fail_doc(self, prep: PreparedDoc, reason: str) -> None:
        with self.lock:
            if prep.planned.doc_id not in self.failed_docs:
                self.failed_docs.add(prep.planned.doc_id)
                self.report.fail(str(prep.planned.source.path), reason)


class _ChunkBudget:
    """Chunks the parser may hold ahead of the embedder: two embed calls' worth.

    One document takes at most one call's worth. That keeps the stages from waiting on each
    other: the embed thread waits for more chunks only while it holds fewer than one call's
    worth, so at least one call's worth is then free. A larger document passes with what it took.
    """

    def __init__(self, per_call: int) -> None:
        self.most = per_call
        self._free = 2 * per_call
        self._cond = threading.Condition()

    def take(self, n: int, stop: threading.Event) -> int | None:
        """Blocks until ``n`` chunks (at most ``most``) are free; the amount taken, or None on stop."""
        n = min(n, self.most)
        with self._cond:
            while self._free < n:
                if stop.is_set():
                    return None
                self._cond.wait(_POLL_S)
            self._free -= n
        return n

    def give(self, n: int) -> None:
        if n:
            with self._cond:
                self._free += n
                self._cond.notify()


def _put(q: queue.Queue[T], item: T, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


class _Embedding:
    """Batches chunks across documents; a document is finished once its last chunk is embedded."""

    def __init__(
        self,
        embedder: Embedder,
        cfg: StreamConfig,
        shared: _Shared,
        budget: _ChunkBudget,
        out: queue.Queue[_Batch | None],
    ) -> None:
        self.embedder, self.cfg, self.shared, self.budget, self.out = embedder, cfg, shared, budget, out
        self.pending: list[tuple[_Open, int]] = []
        self.open: deque[_Open] = deque()
        self.calls = 0

    def add(self, prep: PreparedDoc, credit: int) -> None:
        entry = _Open(prep, len(prep.chunks), credit)
        self.open.append(entry)
        self.pending.extend((entry, i) for i in range(len(prep.chunks)))

    def _vectors(self, texts: list[str]) -> list[list[float]] | None:
        for attempt in (1, 2):
            try:
                vectors = self.embedder.embed(texts)
                if len(vectors) == len(texts):
                    return vectors
            except Exception as exc:  # one bad batch must not kill the run; its documents fail
                log.warning("embed batch of %d failed (attempt %d): %s", len(texts), attempt, type(exc).__name__)
        return None

    def ready(self) -> bool:
        """A full call's worth is pending (a smaller one for the first call)."""
        need = self.cfg.embed_batch if self.calls else min(self.cfg.first_batch, self.cfg.embed_batch)
        return len(self.pending) >= need

    def emit(self, n: int) -> None:
        batch, self.pending = self.pending[:n], self.pending[n:]
        self.calls += 1
        returned = 0
        for entry, _ in batch:  # the parser may go on while these are embedded
            if entry.credit:
                entry.credit -= 1
                returned += 1
        self.budget.give(returned)
        live = [(e, i) for e, i in batch if e.prep.planned.doc_id not in self.shared.failed_docs]
        self.shared.progress.embedding(len(live))
        vectors = self._vectors([e.prep.embed_texts[i] for e, i in live]) if live else []
        items: list[tuple[PreparedDoc, IndexedChunk]] = []
        if vectors is None:
            for entry in {id(e): e for e, _ in live}.values():
                self.shared.fail_doc(entry.prep, "embedding failed")
        else:
            items = [
                (
                    e.prep,
                    IndexedChunk(
                        chunk=e.prep.chunks[i],
                        dense=v,
                        quarantined=e.prep.quarantined[i],
                        index_text=e.prep.embed_texts[i],
                    ),
                )
                for (e, i), v in zip(live, vectors, strict=True)
            ]
            self.shared.progress.embedded(len(items))
            with self.shared.lock:
                self.shared.report.chunks_embedded += len(items)
        for entry, _ in batch:
            entry.left -= 1
        finished: list[PreparedDoc] = []
        while self.open and self.open[0].left == 0:
            finished.append(self.open.popleft().prep)
        _put(self.out, _Batch(items, finished), self.shared.stop)

    def run(self, source: queue.Queue[tuple[PreparedDoc, int] | None]) -> None:
        try:
            if self.cfg.thread_init is not None:
                self.cfg.thread_init()
            done = False
            while not done and not self.shared.stop.is_set():
                try:
                    item = source.get(timeout=_POLL_S)
                except queue.Empty:
                    if len(self.pending) >= self.cfg.min_partial_batch:
                        self.emit(self.cfg.embed_batch)
                    continue
                if item is None:
                    done = True
                else:
                    self.add(*item)
                while self.ready():
                    self.emit(self.cfg.embed_batch)
            while (self.pending or self.open) and not self.shared.stop.is_set():
                self.emit(self.cfg.embed_batch)
        except BaseException as exc:
            self.shared.abort(exc)
        finally:
            self.out.put(None)  # the writer always drains, so this cannot block for long


def _write(index: IndexAdapter, cfg: StreamConfig, shared: _Shared, source: queue.Queue[_Batch | None]) -> None:
    started: set[str] = set()
    while True:
        batch = source.get()
        if batch is None:
            return
        if shared.stop.is_set():
            continue  # keep draining so the embed thread never blocks
        try:
            # Crash safety: a pending record exists before any of the document's chunks do.
            pending: dict[str, DocumentRecord] = {}
            for prep, item in batch.items:
                if item.chunk.doc_id not in started:
                    started.add(item.chunk.doc_id)
                    pending[item.chunk.doc_id] = replace(prep.record, status=cfg.writing_status)
            index.put_documents(list(pending.values()))
            for i in range(0, len(batch.items), cfg.upsert_batch):
                part = [item for _, item in batch.items[i : i + cfg.upsert_batch]]
                index.upsert(part)
                shared.progress.written(len(part))
            done = [prep for prep in batch.finished if prep.planned.doc_id not in shared.failed_docs]
            for prep in done:
                _replace_old_chunks(index, prep, shared)
            index.put_documents([prep.record for prep in done])  # each complete only after its old chunks went
            for prep in done:
                _count_finished(prep, shared)
        except BaseException as exc:
            shared.abort(exc)


def _replace_old_chunks(index: IndexAdapter, prep: PreparedDoc, shared: _Shared) -> None:
    # New chunks are all written; now drop every other chunk of this document (old
    # content, or leftovers of a killed run). Its complete record is written after this.
    removed = index.delete_chunks(prep.planned.doc_id, keep_ids=[c.id for c in prep.chunks])
    with shared.lock:
        shared.report.chunks_deleted += removed


def _count_finished(prep: PreparedDoc, shared: _Shared) -> None:
    with shared.lock:
        report = shared.report
        report.chunks_written += len(prep.chunks)
        report.chunks_flagged += sum(1 for c in prep.chunks if c.flags)
        report.chunks_quarantined += sum(prep.quarantined)
        report.html_whole_body += prep.whole_body
        src = prep.planned.source
        released = prep.released or [False] * len(prep.chunks)
        for chunk, quarantined, freed in zip(prep.chunks, prep.quarantined, released, strict=True):
            if freed:  # where, why and by which ACL file, never the text
                report.release(str(src.path), chunk.page or "", chunk.flags, src.acl_origin)
            elif chunk.flags:
                report.flag(str(src.path), chunk.page or "", chunk.flags, quarantined=quarantined)
        if prep.planned.previous is None:
            report.added += 1
        else:
            report.updated += 1
    shared.progress.file_done()


def index_documents(
    docs: Sequence[PlannedDoc],
    *,
    prepare: Prepare,
    embedder: Embedder,
    index: IndexAdapter,
    cfg: StreamConfig,
    report: Report,
    progress: Progress,
    interrupt: threading.Event | None = None,
) -> None:
    """Prepares, embeds and writes ``docs``; bad files are reported and skipped.

    Raises the first fatal error (an index write failing) after the threads stop. ``interrupt``
    (Ctrl-C) stops the run the same way, at the next check: the embed call in flight finishes, its
    batch is written, then ``KeyboardInterrupt`` is raised here, where no thread holds a lock.
    """
    shared = _Shared(report=report, progress=progress, stop=interrupt or threading.Event())
    # The budget bounds what waits for the embedder; the queue itself never fills.
    budget = _ChunkBudget(cfg.embed_batch)
    to_embed: queue.Queue[tuple[PreparedDoc, int] | None] = queue.Queue()
    to_write: queue.Queue[_Batch | None] = queue.Queue(maxsize=cfg.queued_batches)
    embedding = _Embedding(embedder, cfg, shared, budget, to_write)
    threads = [
        threading.Thread(target=embedding.run, args=(to_embed,), name="ingest-embed", daemon=True),
        threading.Thread(target=_write, args=(index, cfg, shared, to_write), name="ingest-write", daemon=True),
    ]
    for t in threads:
        t.start()
    outcomes = routed(
        docs,
        prepare,
        isolate=isolated(cfg.parse_process),
        timeout_s=cfg.parse_timeout_s,
        stop=shared.stop,
        standby=cfg.standby,
    )
    try:
        with closing(outcomes):  # stops the parse process, whatever happens here
            for planned, got in outcomes:
                if shared.stop.is_set():
                    break
                if isinstance(got, str):
                    with shared.lock:
                        report.fail(str(planned.source.path), got)
                    progress.file_done()
                    continue
                progress.prepared(len(got.chunks))
                credit = budget.take(len(got.chunks), shared.stop)
                if credit is None:
                    break
                to_embed.put((got, credit))
        _put(to_embed, None, shared.stop)
    except BaseException as exc:
        shared.abort(exc)
        raise
    finally:
        for t in threads:
            t.join()
    if shared.errors:
        raise shared.errors[0]
    if interrupt is not None and interrupt.is_set():
        raise KeyboardInterrupt
