"""The plan: compare discovered files with the document records, by content hash.

* add: no record; update: content (or location, or chunking settings) changed,
  or the record is ``pending`` (a run died part-way through it);
* unchanged: same hash and ACL, nothing is written;
* acl_update: same content, other groups: a payload-only change, no re-embedding;
* delete (``--delete-missing``): a record under the given roots (and filters and
  shard) whose file is gone.

Document ids are derived from the file's resolved absolute path, so ingesting a
folder and later its parent does not duplicate documents; point ids derive from
(doc id, content hash, chunk index) (``docquery.collection.chunk_point_id``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from docquery.domain import DocumentRecord
from ingest.discover import Discovery, Filters, Shard
from ingest.model import PlannedDoc, SourceFile

EXTRA_PATH = "path"
EXTRA_PIPELINE = "pipeline"
EXTRA_ACL_ORIGIN = "acl_origin"
EXTRA_FLAGS = "flags"


def doc_id_for(path: Path) -> str:
    return hashlib.sha256(f"file\x1f{path}".encode()).hexdigest()[:32]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


@dataclass
class Plan:
    add: list[PlannedDoc] = field(default_factory=list)
    update: list[PlannedDoc] = field(default_factory=list)
    unchanged: list[SourceFile] = field(default_factory=list)
    acl_update: list[tuple[SourceFile, DocumentRecord]] = field(default_factory=list)
    delete: list[DocumentRecord] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

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
) -> Plan:
    plan = Plan(failed=list(discovery.rejected))
    by_id = {r.doc_id: r for r in records}
    for src in discovery.files:
        try:
            size = src.path.stat().st_size
            if size > max_file_bytes:
                plan.failed.append((str(src.path), f"file too large ({size} bytes > limit {max_file_bytes})"))
                continue
            sha = sha256_file(src.path)
        except OSError as exc:
            plan.failed.append((str(src.path), f"cannot read file ({exc.strerror or type(exc).__name__})"))
            continue
        doc_id = doc_id_for(src.path)
        prev = by_id.get(doc_id)
        planned = PlannedDoc(source=src, doc_id=doc_id, content_sha256=sha, previous=prev)
        if prev is None:
            plan.add.append(planned)
        elif (
            prev.status != "complete"
            or prev.content_sha256 != sha
            or prev.extra.get(EXTRA_PIPELINE) != pipeline_fingerprint
            or prev.source != src.rel
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


def _missing(
    records: Iterable[DocumentRecord], discovery: Discovery, filters: Filters, shard: Shard
) -> list[DocumentRecord]:
    out: list[DocumentRecord] = []
    for record in records:
        path = record_path(record)
        rel = _scope_rel(path, discovery)
        if rel is None or not filters.accepts(rel) or not shard.owns(rel):
            continue
        if not path.is_file():
            out.append(record)
    return sorted(out, key=lambda r: str(record_path(r)))


def _scope_rel(path: Path, discovery: Discovery) -> str | None:
    """The path relative to the first given root that contains it, or None when out of scope."""
    for root in discovery.roots:
        if root in path.parents:
            return path.relative_to(root).as_posix()
    for file_root in discovery.file_roots:
        if path == file_root:
            return path.name
    return None
