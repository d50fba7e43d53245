"""The plan: compare discovered files with the document records, by content hash.

* add: no record; update: content (or location, or chunking settings) changed,
  or the record is ``pending`` (a run died part-way through it);
* unchanged: same hash and ACL, nothing is written;
* acl_update: same content, other groups: a payload-only change, no re-embedding;
* delete (``--delete-missing``): a record under the given roots (and filters and
  shard) whose file is gone;
* skipped: a file of a type DocQuery does not read (not a failure, unless ``--strict``);
* failed: refused before parsing (too large, unreadable, a header check failed).

The type and header checks run here, on the first bytes, so a dry run predicts
them. The stale-ACL step (``stale_acls``) makes sure a document that is not
re-indexed successfully never keeps a wider ACL than its location has now.

Document ids are derived from the file's resolved absolute path, so ingesting a
folder and later its parent does not duplicate documents; point ids derive from
(doc id, content hash, chunk index) (``docquery.core.collection.chunk_point_id``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from docquery.core.collection import PUBLIC_GROUP, document_id
from docquery.core.domain import SETTLED_STATES, DocumentRecord
from ingest.discover.acl import AclResolver, Broken, Found, Resolution
from ingest.discover.walk import Discovery, Filters, Shard
from ingest.model import EXTRA_PATH, EXTRA_PIPELINE, FileRejected, PlannedDoc, SourceFile
from ingest.prepare.loaders import SNIFF_BYTES, kind_for, precheck
from ingest.reading import OpenedFile, open_planned


def sha256_rest(opened: OpenedFile, head: bytes) -> str:
    """The file's SHA-256: ``head`` (already read from it), then the rest of it."""
    h = hashlib.sha256(head)
    while block := os.read(opened.fd, 1 << 20):
        h.update(block)
    return h.hexdigest()


WITHDRAWN = "withdrawn (no ACL applies to its location now)"
WITHDRAWN_BROKEN = "withdrawn (the ACL file that governs its location is refused)"
APPLIED = "current ACL applied to the indexed version"


@dataclass(frozen=True)
class StaleAcl:
    """An indexed document whose ACL must change before (or instead of) re-indexing."""

    record: DocumentRecord
    acl_groups: tuple[str, ...] | None  # None: no ACL applies any more, so it is withdrawn
    acl_origin: str = ""
    broken: bool = False  # withdrawn because its governing ACL file is refused

    @property
    def action(self) -> str:
        if self.acl_groups is None:
            return WITHDRAWN_BROKEN if self.broken else WITHDRAWN
        return APPLIED


@dataclass
class Plan:
    add: list[PlannedDoc] = field(default_factory=list)
    update: list[PlannedDoc] = field(default_factory=list)
    unchanged: list[SourceFile] = field(default_factory=list)
    acl_update: list[tuple[SourceFile, DocumentRecord]] = field(default_factory=list)
    delete: list[DocumentRecord] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    stale_acl: list[StaleAcl] = field(default_factory=list)

    @property
    def to_index(self) -> list[PlannedDoc]:
        return self.add + self.update


def record_path(record: DocumentRecord) -> Path:
    if EXTRA_PATH in record.extra:
        return Path(record.extra[EXTRA_PATH])
    return Path(record.root) / record.source  # records written before the path was kept


def build_plan(
    discovery: Discovery,
    records: Iterable[DocumentRecord],
    *,
    pipeline_fingerprint: str,
    max_file_bytes: int,
    delete_missing: bool,
    filters: Filters,
    shard: Shard,
    doc_id_key: bytes | None = None,
) -> Plan:
    """``doc_id_key``: the collection's (``QdrantIndex.ensure_doc_id_key``); None derives unkeyed ids."""
    plan = Plan(failed=list(discovery.rejected), skipped=list(discovery.skipped))
    by_id = {r.doc_id: r for r in records}
    for found in discovery.files:
        try:
            # One open for the type, the size and the hash; the read that indexes it checks it is the same file.
            with open_planned(found.path, dir_fd=found.dir_fd) as opened:
                head = os.read(opened.fd, SNIFF_BYTES)
                try:
                    kind = kind_for(found.path, head)
                except FileRejected as exc:
                    plan.skipped.append((str(found.path), exc.reason))
                    continue
                if opened.size > max_file_bytes:
                    reason = f"file too large ({opened.size} bytes > limit {max_file_bytes})"
                    plan.failed.append((str(found.path), reason))
                    continue
                precheck(kind, head)
                sha, identity = sha256_rest(opened, head), opened.identity
        except FileRejected as exc:
            plan.failed.append((str(found.path), exc.reason))
            continue
        except OSError as exc:
            plan.failed.append((str(found.path), f"cannot read file ({exc.strerror or type(exc).__name__})"))
            continue
        src = replace(found, kind=kind)
        doc_id = document_id(src.path, doc_id_key)
        prev = by_id.get(doc_id)
        planned = PlannedDoc(source=src, doc_id=doc_id, content_sha256=sha, previous=prev, identity=identity)
        if prev is None:
            plan.add.append(planned)
        elif (
            prev.status not in SETTLED_STATES
            or prev.content_sha256 != sha
            or prev.extra.get(EXTRA_PIPELINE) != src.fingerprint(pipeline_fingerprint)
            or prev.source != src.cited_as
            or prev.root != str(src.root)
        ):
            plan.update.append(planned)
        elif tuple(prev.acl_groups) != src.acl_groups:
            plan.acl_update.append((src, prev))
        else:
            plan.unchanged.append(src)
    if delete_missing:
        plan.delete = _missing(by_id.values(), discovery, filters, shard)
    return plan


def stale_acls(
    plan: Plan,
    records: Iterable[DocumentRecord],
    *,
    discovery: Discovery,
    resolver: AclResolver,
    filters: Filters,
    shard: Shard,
    doc_id_key: bytes | None = None,
) -> list[StaleAcl]:
    """Indexed documents that keep their current chunks for now, and whose ACL must change first.

    Threat: a folder's ACL is narrowed while one of its files fails to load (or is skipped, or
    deleted without ``--delete-missing``); its old chunks must not stay readable under the old
    ACL. Such a document gets the ACL its location resolves to now where that narrows its own
    (``no_wider``), or is withdrawn when none applies or nobody is left. Documents about to be
    re-indexed get it before their new chunks are written, so a load failure cannot leave the old
    ACL behind; their new chunks carry the current ACL in full.
    """
    out: list[StaleAcl] = []
    updating = {p.doc_id: p.source for p in plan.update}
    settled = {document_id(s.path, doc_id_key) for s in plan.unchanged} | {prev.doc_id for _, prev in plan.acl_update}
    deleting = {r.doc_id for r in plan.delete}
    for record in records:
        if record.doc_id in settled or record.doc_id in deleting:
            continue
        if record.doc_id in updating:
            src = updating[record.doc_id]
            current: Resolution | None = Found(src.acl_groups, src.acl_origin)
        else:
            path = record_path(record)
            scope = _scope(path, discovery)
            if scope is None or not filters.accepts(scope[1]) or not shard.owns(scope[1]):
                continue  # outside this run: another run (root, shard) owns it
            current = resolver.resolve(path)
        if current is None or isinstance(current, Broken):
            out.append(StaleAcl(record, None, broken=current is not None))
            continue
        groups = no_wider(tuple(record.acl_groups), current.groups)
        if groups is None:
            out.append(StaleAcl(record, None))
        elif tuple(record.acl_groups) != groups:
            out.append(StaleAcl(record, groups, current.origin))
    return sorted(out, key=lambda s: str(record_path(s.record)))


def no_wider(old: tuple[str, ...], current: tuple[str, ...]) -> tuple[str, ...] | None:
    """The ACL indexed content that is not read again this run may take: ``current`` where it narrows
    ``old``, never anyone new (None: nobody is left, so it is withdrawn).

    Threat: the location a document resolves to now is not proof that its old
    content may be shown more widely. A folder moved or deleted with its ACL file (``mv hr .hr-old``
    needs only write access to the parent) resolves to the parent's ACL, often public; an unreadable
    folder, to the one above it. Only content read from its location this run takes a wider ACL.
    Public admits every caller with a group, so it is wider than any groups and narrowed by any.
    """
    if PUBLIC_GROUP in current:
        return old  # current admits everyone old did: nothing to narrow
    if PUBLIC_GROUP in old:
        return current
    kept = tuple(g for g in current if g in old)
    return kept or None


def _missing(
    records: Iterable[DocumentRecord], discovery: Discovery, filters: Filters, shard: Shard
) -> list[DocumentRecord]:
    out: list[DocumentRecord] = []
    for record in records:
        path = record_path(record)
        rel = _scope_rel(path, discovery)
        if rel is None or not filters.accepts(rel) or not shard.owns(rel):
            continue
        if _gone(path):
            out.append(record)
    return sorted(out, key=lambda r: str(record_path(r)))


def _gone(path: Path) -> bool:
    """Only a file that is not there is missing: one that cannot be checked (an unreadable folder)
    is kept, so a permission change never deletes a document."""
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return not stat.S_ISREG(info.st_mode)


def _scope_rel(path: Path, discovery: Discovery) -> str | None:
    """The path relative to the first given root that contains it, or None when out of scope."""
    scope = _scope(path, discovery)
    return None if scope is None else scope[1]


def _scope(path: Path, discovery: Discovery) -> tuple[Path, str] | None:
    """(the ingest root, the path relative to it) for the first given root containing it."""
    for root in discovery.roots:
        if root in path.parents:
            return root, path.relative_to(root).as_posix()
    for file_root in discovery.file_roots:
        if path == file_root:
            return path.parent, path.name
    return None
