"""Ingestion pipeline (minimal: txt, md, html)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup

from docquery.collection import chunk_point_id
from docquery.domain import Chunk, DocumentRecord, IndexedChunk
from docquery.settings import Settings
from docquery.wiring import build_embedder, build_index

SUPPORTED = {".txt", ".md", ".markdown", ".html", ".htm"}


@dataclass(frozen=True)
class IngestOptions:
    paths: tuple[Path, ...]
    groups: tuple[str, ...]
    collection: str | None = None


@dataclass
class Report:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)
    chunks_written: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "failed": self.failed,
            "chunks_written": self.chunks_written,
            "seconds": round(self.seconds, 3),
        }

    def summary(self) -> str:
        return (
            f"added {self.added}, updated {self.updated}, unchanged {self.unchanged}, deleted {self.deleted}, "
            f"failed {len(self.failed)}, chunks written {self.chunks_written} in {self.seconds:.1f}s"
        )


def _files(paths: tuple[Path, ...]) -> list[tuple[Path, Path]]:
    out = []
    for root in paths:
        if root.is_file():
            out.append((root.parent, root))
        else:
            out.extend((root, p) for p in sorted(root.rglob("*")) if p.is_file())
    return out


def _load(path: Path) -> tuple[str, str]:
    raw = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix.lower() in {".html", ".htm"}:
        soup = BeautifulSoup(raw, "html.parser")
        for tag in soup(["script", "style"]):
            tag.decompose()
        title = soup.title.get_text(strip=True) if soup.title else path.stem
        return title, soup.get_text("\n", strip=True)
    first = next((ln.lstrip("# ").strip() for ln in raw.splitlines() if ln.strip()), path.stem)
    return first, raw


def _chunks(text: str, tokenizer: Any, size: int, overlap: int) -> list[str]:
    words = text.split()
    out, start = [], 0
    step = max(1, size - overlap)
    while start < len(words):
        out.append(" ".join(words[start : start + size]))
        start += step
    return out or [""]


def run_ingest(settings: Settings, opts: IngestOptions) -> Report:
    t0 = time.monotonic()
    report = Report()
    embedder = build_embedder(settings)
    index = build_index(settings, embedder, collection=opts.collection)
    try:
        for root, path in _files(opts.paths):
            if path.suffix.lower() not in SUPPORTED:
                report.failed.append({"path": str(path), "reason": f"unsupported file type {path.suffix or '(none)'}"})
                continue
            rel = str(path.relative_to(root))
            doc_id = hashlib.sha256(f"{root.resolve()}\x1f{rel}".encode()).hexdigest()[:32]
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            existing = index.get_document(doc_id)
            if existing and existing.content_sha256 == sha and existing.status == "complete":
                report.unchanged += 1
                continue
            title, text = _load(path)
            now = datetime.now(UTC).isoformat()
            pieces = _chunks(text, None, settings.ingest.chunk_tokens // 2, settings.ingest.chunk_overlap // 2)
            vectors = embedder.embed(pieces)
            items = [
                IndexedChunk(
                    chunk=Chunk(
                        id=chunk_point_id(doc_id, sha, i),
                        doc_id=doc_id,
                        source=rel,
                        title=title,
                        chunk_index=i,
                        text=piece,
                        content_sha256=sha,
                        acl_groups=opts.groups,
                        ingested_at=now,
                    ),
                    dense=vec,
                )
                for i, (piece, vec) in enumerate(zip(pieces, vectors, strict=True))
            ]
            index.upsert(items)
            index.delete_chunks(doc_id, keep_ids=[it.chunk.id for it in items])
            index.put_document(
                DocumentRecord(
                    doc_id=doc_id,
                    source=rel,
                    root=str(root.resolve()),
                    content_sha256=sha,
                    chunk_count=len(items),
                    acl_groups=opts.groups,
                    title=title,
                    ingested_at=now,
                )
            )
            report.chunks_written += len(items)
            if existing:
                report.updated += 1
            else:
                report.added += 1
    finally:
        index.close()
    report.seconds = time.monotonic() - t0
    return report
