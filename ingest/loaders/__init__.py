"""Loaders by file suffix: bytes in, titled sections out, or ``FileRejected`` with a reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ingest.loaders.docx import load_docx
from ingest.loaders.html import load_html
from ingest.loaders.limits import Limits
from ingest.loaders.markdown import load_markdown
from ingest.loaders.pdf import load_pdf
from ingest.loaders.text import load_text
from ingest.model import FileRejected, LoadedDoc

Loader = Callable[[Path, bytes, Limits], LoadedDoc]

LOADERS: dict[str, Loader] = {
    ".txt": load_text,
    ".text": load_text,
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
    ".docx": load_docx,
}


def loader_for(path: Path) -> Loader:
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise FileRejected(f"unsupported file type {path.suffix.lower() or '(no extension)'!r}")
    return loader


def load(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    return loader_for(path)(path, data, limits)


__all__ = ["LOADERS", "Limits", "load", "loader_for"]
