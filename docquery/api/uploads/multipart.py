"""A strict, incremental ``multipart/form-data`` reader (RFC 7578) for uploads that never sit whole in memory.

Bytes go in as they arrive (``feed``); parts come out as events: a part's start with its field and file
name, its data in pieces, its end. The framing is python-multipart's streaming parser, the parameters its
``parse_options_header`` (which ignores RFC 2231 ``filename*``, as RFC 7578 asks). Checks are added where it
accepts what is refused here: a body that does not open with its boundary, a delimiter line followed by
other text (it reads that as data), a Windows path it would cut to its last segment, a body ending early.
What is held at once is bounded by the header limit and the delimiter's length, whatever the body's size.
Anything that is not well-formed is one :class:`MultipartError` naming what is wrong, never quoting it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser as _Framing
from python_multipart.multipart import parse_options_header

from docquery.core.errors import UsageProblem

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MAX_HEADER_BYTES = 8192  # one part's header block
MAX_HEADERS = 8  # header lines in one part
_BOUNDARY = re.compile(rb"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
# The library logs its parse errors with bytes of the input: it gets a logger nothing is ever enabled on.
_SILENT = logging.Logger("docquery.multipart.library", level=logging.CRITICAL + 1)


class MultipartError(UsageProblem):
    """A malformed body or part. ``field`` is what the error names (``body`` for the framing)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class PartStart:
    name: str
    filename: str | None  # None: a text field; "" only when a client sent an empty filename


@dataclass(frozen=True)
class PartData:
    data: bytes


@dataclass(frozen=True)
class PartEnd:
    pass


Event = PartStart | PartData | PartEnd


def boundary_of(content_type: str | None) -> bytes:
    """The boundary of a ``multipart/form-data`` Content-Type; raises MultipartError."""
    kind, params = parse_options_header((content_type or "").encode("latin-1", "replace"))
    if kind != b"multipart/form-data":
        raise MultipartError("body", "Content-Type must be multipart/form-data with a boundary")
    boundary = params.get(b"boundary")
    if not boundary:
        raise MultipartError("body", "Content-Type has no boundary")
    if _BOUNDARY.fullmatch(boundary) is None:
        raise MultipartError("body", "the boundary is not 1 to 70 characters RFC 2046 allows")
    return boundary


def _reason(exc: FormParserError) -> str:
    """The library's message quotes input bytes: only which kind of error it was is kept."""
    text = str(exc)
    if "header size" in text:
        return f"a part's headers are longer than {MAX_HEADER_BYTES} bytes"
    if "header count" in text:
        return f"a part has more than {MAX_HEADERS} headers"
    if "header" in text:
        return "a part has a malformed header line"
    return "a boundary line carries other text"


class MultipartParser:
    def __init__(self, boundary: bytes, *, max_parts: int) -> None:
        self._opening = b"--" + boundary
        self._delimiter = b"\r\n" + self._opening
        self._opened = 0  # bytes of the opening boundary seen so far
        self._tail = b""  # the end of the part's data so far, where a delimiter may begin
        self._head: list[tuple[bytearray, bytearray]] = []
        self._head_bytes = 0
        self._events: list[Event] = []
        self._parts = 0
        self._max_parts = max_parts
        self.done = False
        callbacks: MultipartCallbacks = {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._header(0, d[s:e]),
            "on_header_value": lambda d, s, e: self._header(1, d[s:e]),
            "on_header_begin": lambda: self._head.append((bytearray(), bytearray())),
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": lambda: self._events.append(PartEnd()),
            "on_end": self._end,
        }
        self._framing = _Framing(boundary, callbacks, max_header_count=MAX_HEADERS, max_header_size=MAX_HEADER_BYTES)
        self._framing.logger = _SILENT

    def feed(self, data: bytes) -> list[Event]:
        if self._opened < len(self._opening):  # no preamble: the library's skipping of one depends on the split
            want = self._opening[self._opened : self._opened + len(data)]
            if data[: len(want)] != want:
                raise MultipartError("body", "the body does not start with its boundary line")
            self._opened += len(want)
        self._events = []
        try:
            self._framing.write(data)
        except FormParserError as exc:
            raise MultipartError("body", _reason(exc)) from None
        return self._events

    def finish(self) -> None:
        """The body has ended: it must have ended with the closing delimiter."""
        if not self.done:
            raise MultipartError("body", "the body ended before the closing boundary")

    def _end(self) -> None:
        self.done = True

    def _part_begin(self) -> None:
        self._parts += 1
        if self._parts > self._max_parts:
            raise MultipartError("files", f"more than {self._max_parts} parts in one request")
        self._head, self._head_bytes, self._tail = [], 0, b""

    def _header(self, which: int, piece: bytes) -> None:
        self._head_bytes += len(piece)
        if self._head_bytes > MAX_HEADER_BYTES:
            raise MultipartError("body", f"a part's headers are longer than {MAX_HEADER_BYTES} bytes")
        self._head[-1][which].extend(piece)

    def _headers_finished(self) -> None:
        try:
            head = [(bytes(name).decode("ascii").lower(), bytes(value).decode("utf-8")) for name, value in self._head]
        except UnicodeDecodeError:  # browsers send file names as raw UTF-8
            raise MultipartError("body", "a part's headers are not UTF-8") from None
        found = [value for name, value in head if name == "content-disposition"]
        if not found:
            raise MultipartError("body", "a part has no Content-Disposition header")
        if len(found) > 1:
            raise MultipartError("body", "a part has two Content-Disposition headers")
        self._events.append(_part_start(found[0]))

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        piece = data[start:end]
        keep = len(self._delimiter) - 1
        # A delimiter followed by anything but padding and CRLF, or "--", is data to the library, refused here.
        if self._delimiter in piece or self._delimiter in self._tail + piece[:keep]:
            raise MultipartError("body", "a boundary line carries other text")
        self._tail = (self._tail + piece[-keep:])[-keep:]
        self._events.append(PartData(piece))


def _part_start(disposition: str) -> PartStart:
    kind, params = parse_options_header(disposition.encode("utf-8"))
    if kind != b"form-data":
        raise MultipartError("body", "a part's Content-Disposition is not form-data")
    field = params.get(b"name", b"").decode("utf-8")
    if not field:
        raise MultipartError("body", "a part has no field name")
    filename = params.get(b"filename")
    if filename is not None and "\\" in disposition.replace('\\"', ""):
        # The library cuts a Windows path to its last segment: a name holding a backslash is refused instead.
        raise MultipartError("files" if field == "files" else "body", "a file name must be a name, not a path")
    return PartStart(name=field, filename=None if filename is None else filename.decode("utf-8"))
