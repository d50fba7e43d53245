"""DOCX archives and tables cannot make the parser allocate past the expansion limit.

A member may declare a small size and inflate far past it; its bytes are never all in memory.
A cell spanning many grid columns gives its text once.
"""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from ingest.model import FileRejected
from ingest.prepare.loaders import Limits, load
from tests.support.ingest_fixtures import make_docx

LIMITS = Limits(max_file_bytes=10_000_000, max_expanded_bytes=1_000_000)
MB = 1 << 20
BOMB = 200 * MB  # inflates this far; compresses to about 200 KB


def _deflated(prefix: bytes, zeros: int) -> tuple[bytes, int]:
    """Raw deflate of ``prefix`` then ``zeros`` zero bytes, and the CRC of all of it, built a MiB at a time."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts, crc, chunk = [comp.compress(prefix)], zlib.crc32(prefix), bytes(MB)
    for done in range(0, zeros, MB):
        piece = chunk[: min(MB, zeros - done)]
        parts.append(comp.compress(piece))
        crc = zlib.crc32(piece, crc)
    parts.append(comp.flush())
    return b"".join(parts), crc


def _member(name: str, raw: bytes, crc: int, size: int, offset: int) -> tuple[bytes, bytes]:
    """A deflated member's local header plus data, and its central-directory entry, with the sizes given."""
    encoded = name.encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(raw), size, len(encoded), 0)
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, crc, len(raw), size, len(encoded), 0, 0, 0, 0, 0, offset
    )
    return local + encoded + raw, central + encoded


def _zip(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """An archive of (name, raw deflate, crc, declared size), written by hand so the sizes can lie."""
    body, directory = b"", b""
    for name, raw, crc, size in members:
        local, central = _member(name, raw, crc, size, len(body))
        body += local
        directory += central
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), len(body), 0)
    return body + directory + end


def _parts(docx: bytes) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(docx)) as zf:
        for info in zf.infolist():
            yield info.filename, zf.read(info)


def _rebuilt(docx: bytes, liar: str, zeros: int, *, declared_delta: int = 0, crc_of_declared: bool = False) -> bytes:
    """``docx`` rebuilt by hand, with ``liar`` followed by ``zeros`` zero bytes it does not declare.

    ``declared_delta`` moves the declared size off the member's real length (the padding aside);
    ``crc_of_declared`` forges the CRC to match the declared bytes, so only the size can give it away.
    """
    members = []
    for name, content in _parts(docx):
        pad = zeros if name == liar else 0
        raw, crc = _deflated(content, pad)
        declared = len(content) + (declared_delta if name == liar else 0)
        if name == liar and crc_of_declared:
            crc = zlib.crc32((content + bytes(max(0, declared - len(content))))[:declared])
        members.append((name, raw, crc, declared))
    return _zip(members)


HONEST = make_docx([("Heading 1", "Plan"), ("", "Ship in May."), ("", "Badges are worn inside.")])


def _text(data: bytes, limits: Limits = LIMITS) -> list[tuple[str, str | None]]:
    return [(s.text, s.page) for s in load(Path("d.docx"), data, limits).sections]


def _peak(data: bytes, limits: Limits = LIMITS) -> tuple[int, str]:
    """Peak bytes Python allocated while loading, and the outcome (the rejection, or "parsed")."""
    tracemalloc.start()
    try:
        load(Path("d.docx"), data, limits)
        got = "parsed"
    except FileRejected as exc:
        got = exc.reason
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, got


class Liar(NamedTuple):
    case: str
    member: str
    zeros: int  # zero bytes past the content, not declared
    delta: int = 0  # declared size minus the content's length
    forged: bool = False  # CRC of the declared bytes, not of what inflates
    expected: str = "corrupt DOCX"


LIARS = [
    Liar("document.xml declares its text, inflates 200 MiB past it", "word/document.xml", BOMB),
    Liar("padding declares 0, inflates 200 MiB", "word/media/padding.bin", BOMB),
    Liar("document.xml lies by one byte", "word/document.xml", 1),
    Liar("padding lies by one byte", "word/media/padding.bin", 1),
    Liar("content type part lies by one byte", "[Content_Types].xml", 1),
    Liar("declared one byte short", "word/document.xml", 0, delta=-1),
    # A forged CRC hides the lie from zipfile: only the declared bytes are ever inflated, so the
    # file parses as if the padding were not there.
    Liar("document.xml, 200 MiB past, CRC forged", "word/document.xml", BOMB, forged=True, expected="parsed"),
    Liar("padding, 200 MiB past, CRC forged", "word/media/padding.bin", BOMB, forged=True, expected="parsed"),
]


@pytest.fixture(scope="module")
def padded() -> bytes:
    """A docx with an empty extra member, the kind of part (media) python-docx never reads."""
    out = io.BytesIO(make_docx([("", "harmless")]))
    with zipfile.ZipFile(out, "a") as zf:
        zf.writestr("word/media/padding.bin", b"")
    return out.getvalue()


@pytest.mark.parametrize("liar", LIARS, ids=[liar.case for liar in LIARS])
def test_a_member_that_inflates_past_its_declared_size_is_never_inflated_past_it(padded: bytes, liar: Liar) -> None:
    data = _rebuilt(padded, liar.member, liar.zeros, declared_delta=liar.delta, crc_of_declared=liar.forged)
    assert len(data) < 400_000
    peak, got = _peak(data)
    assert got.startswith(liar.expected), got
    # python-docx's own objects take a few MB; the lying member adds at most one read step.
    assert peak < 16 * MB, peak
    if liar.expected == "parsed":
        assert _text(data) == _text(padded)


def test_the_rebuilt_archive_is_what_the_lie_needs() -> None:
    """The builder is honest when asked to be, so the cases above test the lie and nothing else."""
    data = _rebuilt(HONEST, "word/document.xml", 0)
    assert _text(data) == _text(HONEST)
    lying = _rebuilt(HONEST, "word/document.xml", 10)
    with zipfile.ZipFile(io.BytesIO(lying)) as zf, pytest.raises(zipfile.BadZipFile, match="CRC"):
        zf.read("word/document.xml")


@pytest.mark.parametrize("members", [2, 3, 10])
def test_members_each_within_the_limit_but_not_together_are_refused(members: int) -> None:
    out = io.BytesIO(HONEST)
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            zf.writestr(f"word/media/pad{i}.bin", bytes(LIMITS.max_expanded_bytes // members + 1))
    peak, got = _peak(out.getvalue())
    assert "zip bomb" in got and peak < 4 * MB


def test_an_honest_docx_gives_the_same_text_as_python_docx() -> None:
    import docx

    document = docx.Document(io.BytesIO(HONEST))
    expected = [p.text for p in document.paragraphs]
    sections = _text(HONEST)
    assert sections == [("Ship in May.\nBadges are worn inside.", "Plan")]
    assert [t for t in expected if t] == ["Plan", "Ship in May.", "Badges are worn inside."]


def test_bzip2_and_lzma_members_are_refused() -> None:
    """zipfile inflates them without an output bound; Office never writes them."""
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        out = io.BytesIO(HONEST)
        with zipfile.ZipFile(out, "a", method) as zf:
            zf.writestr("word/media/x.bin", b"x")
        with pytest.raises(FileRejected, match="unsupported compression"):
            load(Path("d.docx"), out.getvalue(), LIMITS)


def _spanning_docx(span: int, *, vmerge_rows: int = 0) -> bytes:
    """A 2x2 table whose first cell spans ``span`` grid columns, and ``vmerge_rows`` rows merged down."""
    import docx
    from docx.oxml.ns import qn
    from lxml import etree

    document = docx.Document()
    table = document.add_table(rows=2 + vmerge_rows, cols=2)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"cell {r}.{c}"
    first = table.rows[0].cells[0]._tc
    etree.SubElement(first.get_or_add_tcPr(), qn("w:gridSpan")).set(qn("w:val"), str(span))
    if vmerge_rows:
        etree.SubElement(table.rows[1].cells[1]._tc.get_or_add_tcPr(), qn("w:vMerge")).set(qn("w:val"), "restart")
        for row in table.rows[2:]:
            tc = row.cells[1]._tc
            tc.get_or_add_tcPr().append(etree.Element(qn("w:vMerge")))
            for p in tc.findall(qn("w:p"))[1:]:
                tc.remove(p)
            for t in tc.iter(qn("w:t")):
                t.text = ""
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.mark.parametrize("span", [1, 2, 2000, 1_000_000])
def test_a_cell_spanning_grid_columns_gives_its_text_once(span: int) -> None:
    data = _spanning_docx(span)
    text = "\n".join(t for t, _ in _text(data))
    assert text.split("\n") == ["cell 0.0", "cell 0.1", "cell 1.0", "cell 1.1"]


def test_a_cell_merged_down_rows_gives_its_text_once() -> None:
    text = "\n".join(t for t, _ in _text(_spanning_docx(1, vmerge_rows=50)))
    assert text.count("cell 1.1") == 1
    assert text.count("cell 0.0") == 1 and all(f"cell {r}.0" in text for r in range(52))
