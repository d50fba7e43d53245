"""DOCX through python-docx, after a zip-bomb check on the archive's declared sizes.

python-docx never reads the uploaded archive: every member is inflated here, a
chunk at a time, and checked against its declared size and the expansion limit;
python-docx gets an uncompressed copy of what passed. Each table cell (``w:tc``)
is read once, however many grid columns it spans.

Headings ("Heading N" styles) give each section its heading path. Runs a reader
does not see (vanished, coloured like what is behind them, or too small or narrow to read,
as Word resolves their formatting:
``docx_hidden``) are dropped and flag their section ``hidden_text``.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docquery.chunking.code import fenced
from ingest.model import FileRejected, LoadedDoc, Section
from ingest.prepare.loaders.docx_hidden import HiddenRuns
from ingest.prepare.loaders.hidden import FLAG_MIN_CHARS
from ingest.prepare.loaders.limits import MAX_HEADING_CHARS, Limits, TextBudget, heading_path

if TYPE_CHECKING:
    from docx.table import Table

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_STEP = 64 * 1024  # inflate output per read: the most one step of a lying member can allocate


def check_zip(data: bytes, limits: Limits) -> None:
    """Refuse archives that would expand past the limit, before any member is decompressed.

    The declared sizes only bind readers that inflate in bounded steps (``_inflated_copy``):
    ``ZipFile.read`` inflates a whole member in one call and trims to the declared size afterwards.
    """
    if data.startswith(OLE_MAGIC):
        raise FileRejected("encrypted (password-protected) or legacy binary Word document, not a DOCX")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise FileRejected("corrupt DOCX (not a valid zip archive)") from None
    if len(members) > limits.max_zip_members:
        raise FileRejected(f"DOCX has too many archive members ({len(members)} > {limits.max_zip_members})")
    expanded = sum(m.file_size for m in members)
    if expanded > limits.max_expanded_bytes:
        raise FileRejected(
            f"DOCX would expand to {expanded} bytes, past the limit of {limits.max_expanded_bytes} (zip bomb?)"
        )
    if any(m.flag_bits & 0x1 for m in members):
        raise FileRejected("encrypted DOCX archive members")
    # Office writes only stored and deflated members; zipfile inflates bzip2 and LZMA without an output bound.
    if any(m.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) for m in members):
        raise FileRejected("DOCX archive member with an unsupported compression method")


def _copy_member(src: zipfile.ZipFile, info: zipfile.ZipInfo, dst: zipfile.ZipFile, budget: int) -> int:
    """Inflate one member into ``dst`` in small steps; returns the bytes it gave.

    ``ZipExtFile.read(n)`` passes ``n`` to the inflater as its output bound and stops at
    the declared size (whose CRC check then fails if the member had more), so memory stays
    at one step however far the member would inflate.
    """
    given = 0
    # zip64 headers: the limit is a setting, and a copied member over 2 GiB must not fail mid-write.
    with src.open(info) as member, dst.open(info.filename, "w", force_zip64=True) as out:
        while chunk := member.read(_STEP):
            given += len(chunk)
            # Not reached with CPython's zipfile (it trims at the declared size); kept so a
            # reader that stops trimming cannot turn a lying member back into a bomb.
            if given > info.file_size or given > budget:
                raise FileRejected("DOCX archive member inflates past its declared size (zip bomb?)")
            out.write(chunk)
    return given


def _inflated_copy(data: bytes, limits: Limits) -> io.BytesIO:
    """The archive's members, inflated under the limit and stored uncompressed, for python-docx."""
    copy = io.BytesIO()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(copy, "w", zipfile.ZIP_STORED) as dst:
            # A name's last entry, the one zipfile (so python-docx) would read; the others are never inflated.
            members = {info.filename: info for info in src.infolist() if not info.is_dir()}
            left = limits.max_expanded_bytes
            for info in members.values():
                left -= _copy_member(src, info, dst, left)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, zlib.error):
        raise FileRejected("corrupt DOCX (archive member does not inflate to what it declares)") from None
    copy.seek(0)
    return copy


class _Sections:
    def __init__(self, budget: TextBudget, hidden_runs: HiddenRuns) -> None:
        self.path: list[tuple[int, str]] = []
        self.buf: list[str] = []
        self.hidden = 0
        self.out: list[Section] = []
        self.budget = budget
        self.hidden_runs = hidden_runs
        self.code: list[str] = []  # consecutive paragraphs in a code style, fenced as one block

    def end_code(self) -> None:
        if self.code:
            self.buf.append(fenced("\n".join(ln.rstrip() for ln in self.code).strip("\n")))
            self.code.clear()

    def flush(self) -> None:
        self.end_code()
        text = "\n".join(self.buf).strip()
        flags = frozenset({"hidden_text"}) if self.hidden >= FLAG_MIN_CHARS else frozenset()
        if text or flags:
            self.out.append(Section(text=text, page=heading_path(t for _, t in self.path), flags=flags))
        self.buf.clear()
        self.hidden = 0

    def heading(self, level: int, text: str) -> None:
        self.flush()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, text))  # cut by heading_path

    def paragraph(self, para: Any) -> None:
        parts: list[str] = []
        for item in para.iter_inner_content():
            runs = getattr(item, "runs", None)
            for run in runs if runs is not None else [item]:
                if self.hidden_runs.hidden(run, para):
                    self.hidden += len("".join(run.text.split()))
                else:
                    parts.append(run.text)
        text = self.budget.take("".join(parts))
        style = (para.style.name or "") if para.style is not None else ""
        if _is_code_style(style):
            self.code.append(text)
            return
        self.end_code()
        if style == "Title" and text.strip():
            self.heading(0, text.strip())
        elif style.startswith("Heading") and text.strip():
            level = int(style.split()[-1]) if style.split()[-1].isdigit() else 1
            self.heading(level, text.strip())
        elif text.strip():
            self.buf.append(text)


# Word's and LibreOffice's preformatted styles, and the usual custom names ("Code Block", "Source Code").
_CODE_STYLES = frozenset({"html preformatted", "macro text", "preformatted text", "plain text"})


def _is_code_style(style: str) -> bool:
    name = style.strip().lower()
    return name in _CODE_STYLES or name.startswith("code") or name.endswith(" code") or "source code" in name


def _table(table: Table, sections: _Sections) -> None:
    """Each ``w:tc`` once. ``row.cells`` repeats a cell once per grid column it spans
    (``gridSpan``, and ``vMerge`` down the rows): a 36 KB file with gridSpan=2000 gave 18 MB of text."""
    from docx.table import _Cell

    for row in table.rows:
        for tc in row._tr.tc_lst:  # python-docx has no public view of a row's own cells
            for para in _Cell(tc, table).paragraphs:
                sections.paragraph(para)


def load_docx(path: Path, data: bytes, limits: Limits) -> LoadedDoc:
    check_zip(data, limits)
    copy = _inflated_copy(data, limits)
    import docx
    from docx.table import Table

    try:
        document = docx.Document(copy)
        sections = _Sections(TextBudget(limits.max_expanded_bytes, "DOCX text"), HiddenRuns(document))
        title = ""
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                _table(block, sections)
                continue
            if block.style is not None and block.style.name == "Title" and not title:
                title = block.text.strip()
            sections.paragraph(block)
        sections.flush()
        core_title = document.core_properties.title or ""
    except FileRejected:
        raise
    except (KeyError, ValueError, zipfile.BadZipFile, AttributeError, TypeError) as exc:
        raise FileRejected(f"corrupt DOCX ({type(exc).__name__})") from None
    except Exception as exc:
        raise FileRejected(f"corrupt DOCX ({type(exc).__name__})") from None
    return LoadedDoc(title=(core_title.strip() or title or path.stem)[:MAX_HEADING_CHARS], sections=tuple(sections.out))
