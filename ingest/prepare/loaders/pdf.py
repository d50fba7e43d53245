"""PDF through pypdf: one section per page, ``page`` = "p. N" (1-based)."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

from ingest.model import FileRejected, LoadedDoc, Section
from ingest.prepare.loaders.limits import MAX_HEADING_CHARS, Limits, TextBudget

PDF_MAGIC = b"%PDF-"


def _open(data: bytes) -> Any:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        # Owner-password-only PDFs open with the empty user password; anything else is refused.
        try:
            opened = bool(reader.decrypt(""))
        except Exception:
            opened = False
        if not opened:
            raise FileRejected("encrypted PDF (password required)")
    return reader


def _title(reader: Any) -> str:
    try:
        meta = reader.metadata
        return str(meta.title or "").strip() if meta is not None else ""
    except Exception:  # a broken info dict only costs the title
        return ""


def _pages(reader: Any, limits: Limits) -> list[Section]:
    budget = TextBudget(limits.max_expanded_bytes, "PDF text")
    sections = []
    for number, page in enumerate(reader.pages, start=1):
        text = budget.take(page.extract_text() or "")
        if text.strip():
            sections.append(Section(text=text, page=f"p. {number}"))
    return sections


def load_pdf(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    from pypdf.errors import FileNotDecryptedError

    if PDF_MAGIC not in data[:1024]:
        raise FileRejected("not a PDF (no %PDF header)")
    # pypdf logs recoverable damage at WARNING with object details; keep Job logs to our own lines.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = _open(data)
        sections = _pages(reader, limits)
        title = _title(reader)
    except FileRejected:
        raise
    except FileNotDecryptedError:
        raise FileRejected("encrypted PDF (password required)") from None
    except RecursionError:
        raise FileRejected("corrupt PDF (object nesting too deep)") from None
    except Exception as exc:  # pypdf raises many types on damaged input
        raise FileRejected(f"corrupt PDF ({type(exc).__name__})") from None
    if not sections:
        raise FileRejected("PDF has no extractable text (scanned images need OCR, which is not supported)")
    return LoadedDoc(title=(title or path.stem)[:MAX_HEADING_CHARS], sections=tuple(sections))
