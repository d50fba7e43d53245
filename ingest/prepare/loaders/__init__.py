"""Loaders by file type: bytes in, titled sections out, or ``FileRejected`` with a reason.

The type (``kind``) is decided once, by the plan: a supported suffix, or, for files with no
extension and ``.rst`` files, by their content: a file with no extension whose first bytes are an
HTML document goes through the HTML loader (and its hidden-text rules), other text is plain text;
a ``.rst`` file that sniffs as text goes through the reStructuredText loader. Everything else is
skipped with a reason, never failed (docs/ingestion.md). ``precheck`` runs the loaders' cheap
header checks on the first bytes, so a dry run predicts those refusals.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path

from ingest.model import FileRejected, LoadedDoc
from ingest.prepare.loaders.docx import OLE_MAGIC, load_docx
from ingest.prepare.loaders.html import load_html
from ingest.prepare.loaders.limits import Limits
from ingest.prepare.loaders.markdown import load_markdown
from ingest.prepare.loaders.pdf import PDF_MAGIC, load_pdf
from ingest.prepare.loaders.rst import load_rst
from ingest.prepare.loaders.text import load_text
from ingest.prepare.loaders.textcodec import SNIFF_BYTES, looks_binary

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
    ".rst": load_rst,
}
# Read as plain text when their first bytes are text (README, AUTHORS, reStructuredText).
SNIFFED_AS_TEXT = frozenset({"", ".rst"})
TEXT_KINDS = frozenset({".txt", ".text", ".md", ".markdown", ".html", ".htm", ".rst"})
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body")


def suffix_of(path: Path) -> str:
    return path.suffix.lower()


def unsupported(suffix: str) -> str:
    return f"unsupported file type {suffix!r}"


def never_read(path: Path) -> bool:
    """Whether a file is skipped whatever its content: its suffix is neither read nor sniffed for text."""
    suffix = suffix_of(path)
    return suffix not in LOADERS and suffix not in SNIFFED_AS_TEXT


def kind_for(path: Path, head: bytes) -> str:
    """The loader key for ``path`` given its first ``SNIFF_BYTES``; raises FileRejected (a skip)."""
    suffix = suffix_of(path)
    if suffix in LOADERS and suffix not in SNIFFED_AS_TEXT:
        return suffix
    if suffix in SNIFFED_AS_TEXT:
        if sniffs_as_text(head):
            if suffix:
                return suffix
            return ".html" if looks_like_html(head) else ".txt"
        what = "no extension" if not suffix else repr(suffix)
        raise FileRejected(f"unsupported file type ({what}, and the content is not text)")
    raise FileRejected(unsupported(suffix))


def looks_like_html(head: bytes) -> bool:
    """Whether text opens as an HTML document: a doctype or an html, head or body tag first, after a
    byte-order mark, white space, an XML declaration and comments."""
    rest = head.removeprefix(codecs.BOM_UTF8).lower()
    while True:
        rest = rest.lstrip()
        close = b"?>" if rest.startswith(b"<?xml") else b"-->" if rest.startswith(b"<!--") else None
        if close is None:
            start = next((p for p in _HTML_STARTS if rest.startswith(p)), None)
            return start is not None and rest[len(start) : len(start) + 1] in (b" ", b"\t", b"\r", b"\n", b">", b"/")
        end = rest.find(close)
        if end < 0:
            return False
        rest = rest[end + len(close) :]


def sniffs_as_text(head: bytes) -> bool:
    if looks_binary(head):
        return False
    try:  # an incremental decoder accepts a multi-byte character cut at the end of the sample
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return True
    except UnicodeDecodeError:
        pass
    try:
        head.decode("cp1252")
    except UnicodeDecodeError:
        return False
    return True


def precheck(kind: str, head: bytes) -> None:
    """The loaders' header checks, on the first bytes only; raises FileRejected."""
    if kind in TEXT_KINDS and not head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) and looks_binary(head):
        raise FileRejected("binary content in a text file")
    if kind == ".pdf" and PDF_MAGIC not in head[:1024]:
        raise FileRejected("not a PDF (no %PDF header)")
    if kind == ".docx" and head.startswith(OLE_MAGIC):
        raise FileRejected("encrypted (password-protected) or legacy binary Word document, not a DOCX")


def loader_for(kind: str) -> Loader:
    loader = LOADERS.get(kind)
    if loader is None:
        raise FileRejected(f"unsupported file type {kind!r}")
    return loader


def load(path: Path, data: bytes, limits: Limits, kind: str | None = None) -> LoadedDoc:
    """Loads ``data`` as ``kind`` (by default, the kind ``kind_for`` gives the file)."""
    return loader_for(kind or kind_for(path, data[:SNIFF_BYTES]))(path, data, limits)


__all__ = [
    "LOADERS",
    "SNIFF_BYTES",
    "Limits",
    "kind_for",
    "load",
    "loader_for",
    "looks_like_html",
    "never_read",
    "precheck",
    "sniffs_as_text",
    "unsupported",
]  # fmt: skip
