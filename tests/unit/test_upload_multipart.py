"""The multipart reader: well-formed bodies read the same however the bytes are split, and every malformed or
random body is one MultipartError (never another exception), the same whatever the split, with bounded memory.
What python-multipart alone would accept (a preamble, a delimiter followed by text, a Windows path as a file
name) is refused; what it ignores (RFC 2231 ``filename*``) gives no file name."""

from __future__ import annotations

import contextlib
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.api.uploads.multipart import (
    MAX_HEADER_BYTES,
    MultipartError,
    MultipartParser,
    PartData,
    PartEnd,
    PartStart,
    boundary_of,
)

BOUNDARY = b"----docquery-test-boundary"


def _body(parts: list[tuple[str, str | None, bytes]], boundary: bytes = BOUNDARY) -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += b"--" + boundary + b"\r\nContent-Disposition: " + disposition.encode() + b"\r\n\r\n" + data + b"\r\n"
    return out + b"--" + boundary + b"--\r\n"


def _read(body: bytes, cuts: list[int], max_parts: int = 50) -> list[tuple[PartStart, bytes]]:
    parser = MultipartParser(BOUNDARY, max_parts=max_parts)
    out: list[tuple[PartStart, bytes]] = []
    pieces, last = [], 0
    for cut in sorted(c % (len(body) + 1) for c in cuts):
        pieces.append(body[last:cut])
        last = cut
    pieces.append(body[last:])
    ended = 0
    for piece in pieces:
        for event in parser.feed(piece):
            if isinstance(event, PartStart):
                out.append((event, b""))
            elif isinstance(event, PartData):
                out[-1] = (out[-1][0], out[-1][1] + event.data)
            elif isinstance(event, PartEnd):
                ended += 1
    parser.finish()
    assert ended == len(out)
    return out


# Names a client can send in a quoted string; control characters are refused later (validation), whatever
# the header parser makes of them, so they are left out here.
names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters='"\\', exclude_categories=("Cc",)), min_size=1, max_size=30
).filter(lambda n: n == n.strip())
# Data that may hold anything, boundary-like text included, except the delimiter itself.
data = st.binary(max_size=300).filter(lambda d: b"\r\n--" + BOUNDARY not in b"\r\n" + d + b"\r\n")


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.tuples(st.sampled_from(["files", "groups", "x"]), st.none() | names, data), max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_split_reads_the_same_parts(parts: list[tuple[str, str | None, bytes]], cuts: list[int]) -> None:
    body = _body(parts)
    got = _read(body, cuts)
    assert [(p.name, p.filename, d) for p, d in got] == parts


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=2000), cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=6))
def test_random_bytes_are_refused_cleanly(body: bytes, cuts: list[int]) -> None:
    try:
        _read(body, cuts)
    except MultipartError as exc:
        assert exc.field in ("body", "files") and exc.reason
        assert len(body) < 16 or body[:40].decode("latin-1") not in str(exc)  # the body is never quoted


@settings(max_examples=300, deadline=None)
@given(
    good=st.lists(st.tuples(st.just("files"), names, data), min_size=1, max_size=3),
    at=st.integers(min_value=0, max_value=10_000),
    junk=st.binary(min_size=1, max_size=40),
    drop=st.integers(min_value=1, max_value=30),
)
def test_damaged_bodies_are_refused_or_read_whole(
    good: list[tuple[str, str, bytes]], at: int, junk: bytes, drop: int
) -> None:
    """Bytes inserted into, or cut from, a good body: either one MultipartError or parts (never a crash)."""
    body = _body(good)
    where = at % len(body)
    for damaged in (body[:where] + junk + body[where:], body[:where] + body[where + drop :]):
        with contextlib.suppress(MultipartError):
            _read(damaged, [where])


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (b"no boundary anywhere" * 1000, "body", "does not start with its boundary"),
        (b"\r\n--" + BOUNDARY + b"\r\n", "body", "does not start with its boundary"),
        (b"--" + BOUNDARY + b"\r\n" + b"X-A: b" * 2000, "body", "headers are longer"),
        (
            b"--" + BOUNDARY + b"\r\nContent-Type: text/plain\r\n\r\nx\r\n--" + BOUNDARY + b"--",
            "body",
            "no Content-Disp",
        ),
        (b"--" + BOUNDARY + b'\r\nContent-Disposition: attachment; name="a"\r\n\r\nx', "body", "not form-data"),
        (b"--" + BOUNDARY + b"\r\nContent-Disposition: form-data\r\n\r\nx", "body", "no field name"),
        (b"--" + BOUNDARY + b"\r\nbad header\r\n\r\n", "body", "malformed header"),
        (b"--" + BOUNDARY + b"garbage\r\n", "body", "carries other text"),
        (b"--" + BOUNDARY + b'\r\nContent-Disposition: form-data; name="\xff"\r\n\r\n', "body", "not UTF-8"),
        (_body([("files", "a", b"x")])[:-10], "body", "ended before"),
        (_body([("files", str(i), b"x") for i in range(4)]), "files", "more than 3 parts"),
    ],
)
def test_each_malformation_names_what_is_wrong(body: bytes, field: str, says: str) -> None:
    with pytest.raises(MultipartError) as caught:
        _read(body, [7, 50], max_parts=3)
    assert caught.value.field == field and says in caught.value.reason


def test_what_is_held_stays_bounded_whatever_the_size() -> None:
    parser = MultipartParser(BOUNDARY, max_parts=2)
    parser.feed(b"--" + BOUNDARY + b'\r\nContent-Disposition: form-data; name="files"; filename="a"\r\n\r\n')
    fed = out = 0
    for _ in range(200):
        piece = b"\r\n-" * 20_000  # near-delimiters, 60 KB a piece
        fed += len(piece)
        out += sum(len(e.data) for e in parser.feed(piece) if isinstance(e, PartData))
        assert fed - out < len(BOUNDARY) + 4  # held back: at most what could begin a delimiter
    assert not parser.done
    assert MAX_HEADER_BYTES <= 8192


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "application/json",
        "multipart/mixed; boundary=x",
        "multipart/form-data",
        "multipart/form-data; boundary=",
        "multipart/form-data; boundary=" + "a" * 71,
        'multipart/form-data; boundary="bad\x00"',
    ],
)
def test_a_content_type_without_a_usable_boundary_is_refused(content_type: str | None) -> None:
    with pytest.raises(MultipartError) as caught:
        boundary_of(content_type)
    assert caught.value.field == "body"


def test_quoted_and_plain_boundaries() -> None:
    assert boundary_of("multipart/form-data; boundary=abc") == b"abc"
    assert boundary_of('Multipart/Form-Data; charset=utf-8; boundary="a b:c"') == b"a b:c"


def _outcome(body: bytes, cuts: list[int]) -> object:
    try:
        return [(p.name, p.filename, d) for p, d in _read(body, cuts)]
    except MultipartError as exc:
        return (exc.field, exc.reason)


@settings(max_examples=300, deadline=None)
@given(
    good=st.lists(st.tuples(st.sampled_from(["files", "groups"]), st.none() | names, data), max_size=3),
    at=st.integers(min_value=0, max_value=10_000),
    junk=st.binary(min_size=1, max_size=40) | st.sampled_from([b"\r\n", b"\r\nx", b"-", b"\r\n\r\n"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8),
)
def test_the_outcome_does_not_depend_on_how_the_bytes_are_split(
    good: list[tuple[str, str | None, bytes]], at: int, junk: bytes, cuts: list[int]
) -> None:
    """Read whole or in pieces, a body (damaged or not, a preamble included) gives the same parts or error."""
    body = _body(good)
    where = at % (len(body) + 1)
    for case in (body, junk + body, body[:where] + junk + body[where:]):
        assert _outcome(case, cuts) == _outcome(case, [])


@settings(max_examples=200, deadline=None)
@given(
    before=data,
    after=st.sampled_from([b"x", b"-x", b"\rx", b"\r", b"-", b"garbage\r\n", b"\x00--"]) | st.binary(min_size=1),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_a_delimiter_followed_by_other_text_is_refused(before: bytes, after: bytes, cuts: list[int]) -> None:
    """A line starting with the delimiter ends the part; only padding then CRLF, or "--", may follow it."""
    if after[:1] in (b" ", b"\t") or after.startswith((b"\r\n", b"--")):
        return
    opened = _body([("files", "a.txt", before)])[: -len(BOUNDARY) - 6]  # up to the closing delimiter's "--"
    body = opened + b"--" + BOUNDARY + after + b"\r\n--" + BOUNDARY + b"--\r\n"
    assert body.count(b"\r\n--" + BOUNDARY) >= 2
    assert _outcome(body, cuts) == ("body", "a boundary line carries other text")


@settings(max_examples=200, deadline=None)
@given(
    path=st.lists(st.sampled_from(["C:", "dir", "..", "", "x.txt", "\\\\srv", "é"]), min_size=1, max_size=4),
    drive=st.booleans(),
)
def test_a_file_name_holding_a_backslash_is_refused_not_cut(path: list[str], drive: bool) -> None:
    """python-multipart keeps only a Windows path's last segment; the name is refused instead."""
    name = ("C:\\" if drive else "\\\\") + "\\".join(path)
    raw = name.replace("\\", "\\\\")  # as a quoted string
    body = _body([("files", raw, b"x")])
    outcome = _outcome(body, [9])
    assert outcome == ("files", "a file name must be a name, not a path")


@pytest.mark.parametrize(
    ("disposition", "filename"),
    [
        ("filename*=UTF-8''r%C3%A9sum%C3%A9.txt", None),  # RFC 7578 forbids the RFC 2231 form: no name
        ("filename*0=a; filename*1=b.txt", None),
        ("filename=\"plain.txt\"; filename*=UTF-8''other.txt", "plain.txt"),
        ('filename="a\\"b.txt"', 'a"b.txt'),
        ('filename="日本.txt"', "日本.txt"),
        ('filename="a;b.txt"', "a;b.txt"),
        ('filename=""', ""),
    ],
)
def test_file_name_parameters(disposition: str, filename: str | None) -> None:
    body = b"--" + BOUNDARY + b'\r\nContent-Disposition: form-data; name="files"; '
    body += disposition.encode() + b"\r\n\r\nx\r\n--" + BOUNDARY + b"--\r\n"
    ((part, _),) = _read(body, [])
    assert (part.name, part.filename) == ("files", filename)


@pytest.mark.parametrize(
    ("head", "says"),
    [
        (b"Content-Disposition: form-data; name*=UTF-8''files", "no field name"),
        (b'Content-Disposition: form-data; name=""', "no field name"),
        (b'Content-Disposition: form-data; name="a"\r\nContent-Disposition: form-data; name="b"', "two Content"),
        (b"X-A: 1\r\n" * 9 + b'Content-Disposition: form-data; name="a"', "more than 8 headers"),
        (b' Content-Disposition: form-data; name="a"', "malformed header"),
        (b'Content-Disposition: form-data; name="a"\rX', "malformed header"),
        (b"X-A: " + b"b" * 5000 + b"\r\nX-B: " + b"b" * 5000, "headers are longer"),
    ],
)
def test_header_blocks_the_library_reads_but_are_refused(head: bytes, says: str) -> None:
    body = b"--" + BOUNDARY + b"\r\n" + head + b"\r\n\r\nx\r\n--" + BOUNDARY + b"--\r\n"
    for cuts in ([], [11, 40, 300]):
        outcome = _outcome(body, cuts)
        assert isinstance(outcome, tuple) and outcome[0] == "body" and says in outcome[1], outcome


def test_the_library_logs_nothing_of_the_input(caplog: pytest.LogCaptureFixture) -> None:
    bodies = [b"--" + BOUNDARY + b"\r\nSecret\x01: x\r\n\r\n", b"--" + BOUNDARY + b"Zq\r\n", b"\r\nSecretPreamble"]
    with caplog.at_level(logging.DEBUG):
        for body in bodies:
            with pytest.raises(MultipartError):
                _read(body, [])
    assert caplog.records == []
