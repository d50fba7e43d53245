"""One document from bytes to chunks: load, scan, chunk, and build its final record.

Metadata is content (threat: an injection in a heading or a PDF ``/Title`` reaching the
prompt's source header unflagged): the title and each section's page or heading path go
through the same invisible-character strip and injection scan as the body, and their flags
mark every chunk that carries them, so those chunks are quarantined like flagged text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from docquery.chunking import SentenceChunker, TitlePrefix
from docquery.core.collection import chunk_point_id
from docquery.core.domain import Chunk, DocumentRecord
from ingest.model import (
    EXTRA_ACL_ORIGIN,
    EXTRA_FLAGS,
    EXTRA_PATH,
    EXTRA_PIPELINE,
    FileRejected,
    PlannedDoc,
    PreparedDoc,
)
from ingest.prepare.loaders import Limits, loader_for, suffix_of
from ingest.prepare.scan import scan_and_strip
from ingest.prepare.secrets import scan_secrets
from ingest.reading import FileIdentity, open_planned, read_all


@dataclass(frozen=True)
class PrepareConfig:
    limits: Limits
    quarantine_flagged: bool
    pipeline_fingerprint: str
    ingested_at: str


def prepare(planned: PlannedDoc, chunker: SentenceChunker, cfg: PrepareConfig) -> PreparedDoc:
    """Raises FileRejected with a reason for any file that cannot be indexed.

    ``chunker`` is built once per run (it holds the tokenizer, the chunk settings and the splitter).
    """
    src = planned.source
    loader = loader_for(src.kind or suffix_of(src.path))  # unsupported types fail before the file is read
    expected = FileIdentity(*planned.identity) if planned.identity is not None else None
    try:
        with open_planned(src.path, expected, src.dir_fd) as opened:
            data = read_all(opened, cfg.limits.max_file_bytes)
    except OSError as exc:
        raise FileRejected(f"cannot read file ({exc.strerror or type(exc).__name__})") from None
    if len(data) > cfg.limits.max_file_bytes:
        raise FileRejected(f"file too large ({len(data)} bytes > limit {cfg.limits.max_file_bytes})")
    # The file may have changed since it was planned: index what was actually read.
    sha = hashlib.sha256(data).hexdigest()
    doc = loader(src.path, data, cfg.limits)
    pieces = chunker.chunk(doc.sections)
    chunks: list[Chunk] = []
    quarantined: list[bool] = []
    released: list[bool] = []
    title_flags, title = scan_and_strip(doc.title)
    doc_flags: set[str] = {f for s in doc.sections for f in s.flags} | title_flags
    pages: dict[str | None, tuple[frozenset[str], str | None]] = {None: (frozenset(), None)}
    for i, piece in enumerate(pieces):
        found, text = scan_and_strip(piece.text)
        found |= scan_secrets(text)
        if piece.page not in pages:  # a section's chunks share its page: scanned once
            page_flags, page_text = scan_and_strip(piece.page or "")
            pages[piece.page] = (page_flags, page_text or None)
        page_flags, page = pages[piece.page]
        flags = found | piece.flags | title_flags | page_flags
        doc_flags |= flags
        chunks.append(
            Chunk(
                id=chunk_point_id(planned.doc_id, sha, i),
                doc_id=planned.doc_id,
                source=src.cited_as,
                title=title,
                chunk_index=i,
                text=text,
                content_sha256=sha,
                acl_groups=src.acl_groups,
                page=page,
                ingested_at=cfg.ingested_at,
                flags=tuple(sorted(flags)),
                section=piece.section,
                char_start=piece.start,
                char_end=piece.end,
            )
        )
        # A chunk is released only when its governing ACL file releases every one of its flags.
        freed = bool(flags) and cfg.quarantine_flagged and flags <= set(src.released)
        released.append(freed)
        quarantined.append(bool(flags) and cfg.quarantine_flagged and not freed)
    prefix = TitlePrefix.of(doc.title, chunker.tokenizer, chunker.spec)  # one title per document
    extra = {
        EXTRA_PATH: str(src.path),
        EXTRA_PIPELINE: src.fingerprint(cfg.pipeline_fingerprint),
        EXTRA_ACL_ORIGIN: src.acl_origin,
    }
    if doc_flags:
        extra[EXTRA_FLAGS] = ",".join(sorted(doc_flags))
    record = DocumentRecord(
        doc_id=planned.doc_id,
        source=src.cited_as,
        root=str(src.root),
        content_sha256=sha,
        chunk_count=len(chunks),
        acl_groups=src.acl_groups,
        title=title,
        ingested_at=cfg.ingested_at,
        status="quarantined" if any(quarantined) else "indexed",
        extra=extra,
    )
    return PreparedDoc(
        planned=planned,
        record=record,
        chunks=chunks,
        quarantined=quarantined,
        released=released,
        embed_texts=[prefix.apply(c.text) for c in chunks],
        whole_body=doc.whole_body,
    )
