"""Indexed chunks for the index tests, built as ingest builds them (deterministic ids from doc, hash, index)."""

from __future__ import annotations

from typing import Any

from docquery.core.collection import chunk_point_id
from docquery.core.domain import Chunk, IndexedChunk


def make_chunk(
    embedder: Any,
    doc_id: str,
    text: str,
    groups: tuple[str, ...],
    *,
    index: int = 0,
    quarantined: bool = False,
    title: str = "",
) -> IndexedChunk:
    sha = f"sha-{doc_id}"
    chunk = Chunk(
        id=chunk_point_id(doc_id, sha, index),
        doc_id=doc_id,
        source=f"{doc_id}.txt",
        title=title or doc_id,
        chunk_index=index,
        text=text,
        content_sha256=sha,
        acl_groups=groups,
    )
    return IndexedChunk(chunk=chunk, dense=embedder.embed([text])[0], quarantined=quarantined)
