"""``run_ingest``: discover -> plan -> (stale ACLs, ACL-only updates, index changed docs, delete missing) -> report.

Everything that can be refused is refused before the index is opened, so a
usage or configuration error (exit 2) writes nothing. Components can be passed
in (tests, benchmarks); otherwise they are built from settings like the rest of
DocQuery (``docquery.wiring``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from docquery import validation
from docquery.chunking import ChunkSpec, SentenceChunker, tokenizer_for
from docquery.config.settings import Settings
from docquery.core.domain import DocumentRecord
from docquery.core.errors import DocQueryError
from docquery.core.ports import Embedder, IndexAdapter
from docquery.runtime.preflight import check_data_dir, check_index_free, edge_collection
from docquery.wiring import build_embedder, build_index
from ingest.discover.acl import AclResolver
from ingest.discover.folders import raise_open_files_limit
from ingest.discover.walk import Discovery, Filters, Shard, discover
from ingest.model import EXTRA_ACL_ORIGIN, PlannedDoc, UsageError
from ingest.plan.compare import Plan, build_plan, record_path, stale_acls
from ingest.prepare.document import PrepareConfig, prepare
from ingest.prepare.loaders import Limits
from ingest.prepare.secrets import SCAN_VERSION
from ingest.report.progress import NullProgress, Progress
from ingest.report.summary import Report
from ingest.report.terminal import safe
from ingest.write.stream import StreamConfig, index_documents

log = logging.getLogger("ingest")
PIPELINE_VERSION = "1"


@dataclass(frozen=True)
class IngestOptions:
    paths: tuple[Path, ...]
    groups: tuple[str, ...] | None = None  # fallback ACL (PUBLIC_GROUP alone for --public)
    acl_origin: str = "--groups"
    collection: str | None = None
    filters: Filters = field(default_factory=Filters)
    delete_missing: bool = False
    dry_run: bool = False
    shard: Shard = field(default_factory=Shard)
    strict: bool = False  # --strict: skipped files (types DocQuery does not read) count as failures
    acl_root: Path | None = None  # --acl-root; None: ingest.acl_root, else each PATH


def pipeline_fingerprint(spec: ChunkSpec, quarantine: bool) -> str:
    """A change of chunking, quarantine policy or secret scan re-indexes (and so re-scans) every document.
    Each record stores it with the document's own releases (``SourceFile.fingerprint``), so a release
    added or removed re-indexes that document."""
    return f"v{PIPELINE_VERSION};chunks={spec.fingerprint};quarantine={int(quarantine)};secrets={SCAN_VERSION}"


def _collection_exists(settings: Settings, name: str) -> bool:
    edge = edge_collection(settings, name)
    return edge is None or edge.exists  # a server collection is opened (and created if absent) as usual


def _discover(opts: IngestOptions, acl_root: Path | None, report: Report) -> tuple[AclResolver, Discovery]:
    root = opts.acl_root or acl_root
    if root is not None and not root.is_dir():
        raise UsageError(f"ACL root {root} (--acl-root, DOCQUERY_INGEST__ACL_ROOT) is not a folder")
    resolver = AclResolver(opts.groups, opts.acl_origin, root=root)
    raise_open_files_limit()  # discovery holds every folder open until the run ends
    discovery = discover(opts.paths, filters=opts.filters, shard=opts.shard, acl=resolver)
    _warn_empty_paths(opts, discovery)
    report.acl_from = {str(f.path): f.acl_origin for f in discovery.files}
    report.releases = {
        str(f.path): {"reason": ",".join(f.released), "acl_file": f.acl_origin} for f in discovery.files if f.released
    }
    return resolver, discovery


def _warn_empty_paths(opts: IngestOptions, discovery: Discovery) -> None:
    """A PATH with nothing to index is a warning, not a silent no-op: usually a typo in it or in a glob."""
    found = [f.root / f.rel for f in discovery.files] + [Path(p) for p, _ in discovery.rejected]
    for given in opts.paths:
        where = given.resolve()
        if not any(p == where or where in p.parents for p in found):
            scope = " in this shard" if opts.shard.count > 1 else ""
            globs = " after --include/--exclude" if opts.filters.include or opts.filters.exclude else ""
            # A path is untrusted text: escaped as in the report (ingest.report.terminal.safe at merge).
            log.warning("%s holds no file to index%s%s", safe(str(given)), globs, scope)


def _plan_report(plan: Plan, report: Report) -> None:
    report.plan = {
        "add": [str(p.source.path) for p in plan.add],
        "update": [str(p.source.path) for p in plan.update],
        "acl_update": [str(s.path) for s, _ in plan.acl_update],
        "unchanged": [str(s.path) for s in plan.unchanged],
        "delete": [str(record_path(r)) for r in plan.delete],
        "acl_previous": [str(record_path(s.record)) for s in plan.stale_acl],
    }
    report.added, report.updated = len(plan.add), len(plan.update)
    report.acl_updated, report.unchanged, report.deleted = len(plan.acl_update), len(plan.unchanged), len(plan.delete)


def _apply_acl_updates(index: IndexAdapter, plan: Plan, report: Report) -> None:
    for src, prev in plan.acl_update:
        # Payload-only: chunks keep their vectors. Chunks first, record last, so a
        # crash in between leaves the old ACL on the record and the re-run redoes it.
        index.set_document_acl(prev.doc_id, src.acl_groups)
        extra = {**prev.extra, EXTRA_ACL_ORIGIN: src.acl_origin}
        index.put_document(replace(prev, acl_groups=src.acl_groups, extra=extra))
        report.acl_updated += 1


def _report_refusals(plan: Plan, report: Report, *, strict: bool) -> None:
    for path, reason in plan.failed:
        report.fail(path, reason)
    for path, reason in plan.skipped:
        if strict:
            report.fail(path, f"skipped under --strict: {reason}")
        else:
            report.skip(path, reason)


def _apply_stale_acls(index: IndexAdapter, plan: Plan, report: Report) -> None:
    for stale in plan.stale_acl:
        prev = stale.record
        if stale.acl_groups is None:
            report.chunks_deleted += index.delete_document(prev.doc_id)
        else:
            # Chunks first, record last, as for an ACL-only update; the content hash stays the
            # old one, so a document that is about to be re-indexed still counts as changed.
            index.set_document_acl(prev.doc_id, stale.acl_groups)
            extra = {**prev.extra, EXTRA_ACL_ORIGIN: stale.acl_origin}
            index.put_document(replace(prev, acl_groups=stale.acl_groups, extra=extra))
        report.acl_previous.append({"path": str(record_path(prev)), "action": stale.action})


def _apply_deletes(index: IndexAdapter, plan: Plan, report: Report) -> None:
    for record in plan.delete:
        report.chunks_deleted += index.delete_document(record.doc_id)
        report.deleted += 1


def _doc_id_key(index: IndexAdapter | None, *, dry_run: bool) -> bytes | None:
    """The collection's doc-id key: made now for a collection without documents; a dry run writes nothing."""
    if index is None:
        return None
    return index.doc_id_key() if dry_run else index.ensure_doc_id_key()


def run_ingest(
    settings: Settings,
    opts: IngestOptions,
    *,
    embedder: Embedder | None = None,
    index: IndexAdapter | None = None,
    progress: Progress | None = None,
    interrupt: threading.Event | None = None,
) -> Report:
    """Raises UsageError before anything is written; index failures propagate after the threads stop.

    ``interrupt`` set (the first Ctrl-C) ends the indexing stage early with ``KeyboardInterrupt``.
    """
    t0 = time.monotonic()
    cfg = settings.ingest
    report = Report(dry_run=opts.dry_run, shard=f"{opts.shard.index}/{opts.shard.count}")
    spec = validation.chunk_spec(settings)
    resolver, discovery = _discover(opts, cfg.acl_root, report)
    fingerprint = pipeline_fingerprint(spec, cfg.quarantine_flagged)
    collection = opts.collection or settings.qdrant.collection

    owns_index = index is None
    if owns_index:
        check_data_dir(settings, collection)  # a file or an unreadable folder: exit 2, before anything loads
        check_index_free(settings, collection)  # BusyError before anything is loaded or written
    if opts.dry_run and index is None and not _collection_exists(settings, collection):
        # A dry run against a collection that does not exist yet: do not create it.
        records, doc_id_key = list[DocumentRecord](), None
    else:
        # Lazy: the model loads only when a document needs embedding, so an unchanged run never loads it.
        embedder = embedder or build_embedder(settings, lazy=True)
        index = index or build_index(settings, embedder, collection=collection)
        records, doc_id_key = index.list_documents(), _doc_id_key(index, dry_run=opts.dry_run)
    try:
        plan = build_plan(
            discovery,
            records,
            pipeline_fingerprint=fingerprint,
            max_file_bytes=cfg.max_file_bytes,
            delete_missing=opts.delete_missing,
            filters=opts.filters,
            shard=opts.shard,
            doc_id_key=doc_id_key,
        )
        plan.stale_acl = stale_acls(
            plan,
            records,
            discovery=discovery,
            resolver=resolver,
            filters=opts.filters,
            shard=opts.shard,
            doc_id_key=doc_id_key,
        )
        _report_refusals(plan, report, strict=opts.strict)
        if opts.dry_run:
            _plan_report(plan, report)
            return report
        if index is None or embedder is None:
            raise UsageError("internal: the index was not opened")
        report.unchanged = len(plan.unchanged)
        try:
            _apply_stale_acls(index, plan, report)
            _apply_acl_updates(index, plan, report)
            if plan.to_index:
                _index(
                    settings,
                    plan.to_index,
                    embedder=embedder,
                    index=index,
                    report=report,
                    progress=progress or NullProgress(),
                    spec=spec,
                    fingerprint=fingerprint,
                    interrupt=interrupt,
                )
            _apply_deletes(index, plan, report)
            index.flush()
            if cfg.optimize and report.chunks_written:
                # Edge never optimizes by itself. The collection's thresholds decide what this does:
                # nothing until the unindexed segment passes indexing_threshold_kb, and never a merge
                # past max_segment_size_kb, so a small run into a large collection stays cheap
                # (docs/ingestion.md, "End of a run").
                t_opt = time.monotonic()
                rebuilt = index.optimize()
                outcome = "rebuilt segments" if rebuilt else "nothing to do"
                log.info("index optimize: %s in %.2fs", outcome, time.monotonic() - t_opt)
        except DocQueryError as exc:
            # Something may already be written, so this is not a usage error: report it (exit 1).
            # A re-run converges (pending records, deterministic ids).
            report.error = f"stopped early: {exc}"
            log.error("ingest stopped early: %s", safe(str(exc)))
    finally:
        report.seconds = time.monotonic() - t0
        discovery.close()
        if owns_index and index is not None:
            index.close()
    # DEBUG: the report itself is printed once, on stdout (ingest/cli.py); this repeats it for debugging.
    log.debug(
        "ingest done: added=%d updated=%d acl_updated=%d unchanged=%d deleted=%d failed=%d chunks_written=%d %.2fs",
        report.added,
        report.updated,
        report.acl_updated,
        report.unchanged,
        report.deleted,
        len(report.failed),
        report.chunks_written,
        report.seconds,
    )
    return report


def _index(
    settings: Settings,
    docs: list[PlannedDoc],
    *,
    embedder: Embedder,
    index: IndexAdapter,
    report: Report,
    progress: Progress,
    spec: ChunkSpec,
    fingerprint: str,
    interrupt: threading.Event | None = None,
) -> None:
    cfg = settings.ingest
    prep_cfg = PrepareConfig(
        limits=Limits(max_file_bytes=cfg.max_file_bytes, max_expanded_bytes=cfg.max_expanded_bytes),
        quarantine_flagged=cfg.quarantine_flagged,
        pipeline_fingerprint=fingerprint,
        ingested_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    stream_cfg = StreamConfig(
        embed_batch=cfg.embed_batch,
        upsert_batch=cfg.upsert_batch,
        parse_process=cfg.parse_process,
        parse_timeout_s=cfg.parse_timeout_s,
    )
    progress.start(len(docs))
    try:
        index_documents(
            docs,
            prepare=partial(prepare, chunker=SentenceChunker(tokenizer_for(embedder), spec), cfg=prep_cfg),
            embedder=embedder,
            index=index,
            cfg=stream_cfg,
            report=report,
            progress=progress,
            interrupt=interrupt,
        )
    finally:
        progress.close()
