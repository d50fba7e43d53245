"""Plain text: one section, titled by its first non-empty line."""

from __future__ import annotations

from pathlib import Path

from ingest.model import LoadedDoc, Section
from ingest.prepare.loaders.limits import MAX_HEADING_CHARS, Limits
from ingest.prepare.loaders.textcodec import decode_text


def first_line_title(text: str, fallback: str, *, strip: str = "") -> str:
    for line in text.splitlines():
        clean = line.strip().lstrip(strip).strip()
        if clean:
            return clean[:MAX_HEADING_CHARS]
    return fallback


def load_text(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    text = decode_text(data)
    return LoadedDoc(title=first_line_title(text, path.stem), sections=(Section(text=text),))
