"""A strict, incremental ``multipart/form-data`` reader (RFC 7578) for uploads that never sit whole in memory.

Bytes go in as they arrive (``feed``); parts come out as events: a part's start with its field and file
name, its data in pieces, its end. What it holds at once is bounded by the part headers' limit and the
delimiter's length, whatever the body's size. A part's header block is parsed by the standard library's
``email`` header code (quoted strings, RFC 2231 ``filename*``); the framing is checked strictly, and
anything that is not well-formed is one :class:`MultipartError` naming what is wrong, never quoting it.
"""

from __future__ import annotations

import email.message
import re
from dataclasses import dataclass

from docquery.core.errors import UsageProblem

MAX_HEADER_BYTES = 8192  # one part's header block
MAX_PREAMBLE_BYTES = 8192
_BOUNDARY = re.compile(rb"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


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
    if not content_type:
        raise MultipartError("body", "Content-Type must be multipart/form-data with a boundary")
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_type() != "multipart/form-data":
        raise MultipartError("body", "Content-Type must be multipart/form-data with a boundary")
    boundary = message.get_param("boundary")
    if not isinstance(boundary, str):
        raise MultipartError("body", "Content-Type has no boundary")
    raw = boundary.encode("latin-1", errors="replace")
    if _BOUNDARY.fullmatch(raw) is None:
        raise MultipartError("body", "the boundary is not 1 to 70 characters RFC 2046 allows")
    return raw


class MultipartParser:
    def __init__(self, boundary: bytes, *, max_parts: int) -> None:
        self._delimiter = b"\r\n--" + boundary
        self._buf = bytearray(b"\r\n")  # the first delimiter may open the body without a line break before it
        self._state = "preamble"  # preamble | after | headers | body | end
        self._parts = 0
        self._max_parts = max_parts

    @property
    def done(self) -> bool:
        return self._state == "end"

    def feed(self, data: bytes) -> list[Event]:
        self._buf += data
        events: list[Event] = []
        while self._step(events):
            pass
        return events

    def finish(self) -> None:
        """The body has ended: it must have ended with the closing delimiter."""
        if self._state != "end":
            raise MultipartError("body", "the body ended before the closing boundary")

    def _step(self, events: list[Event]) -> bool:
        """One move of the state machine; False when it needs more bytes."""
        if self._state == "preamble":
            at = self._buf.find(self._delimiter)
            if at < 0:
                if len(self._buf) > MAX_PREAMBLE_BYTES:
                    raise MultipartError("body", "no boundary line where the body should start")
                return False
            del self._buf[: at + len(self._delimiter)]
            self._state = "after"
            return True
        if self._state == "after":
            return self._after_delimiter(events)
        if self._state == "headers":
            return self._headers(events)
        if self._state == "body":
            return self._body(events)
        self._buf.clear()  # the epilogue is ignored
        return False

    def _after_delimiter(self, events: list[Event]) -> bool:
        if len(self._buf) < 2:
            return False
        if self._buf[:2] == b"--":
            self._state = "end"
            return True
        end = self._buf.find(b"\r\n")
        if end < 0:
            if len(self._buf) > 256:
                raise MultipartError("body", "a boundary line does not end")
            return False
        if self._buf[:end].strip(b" \t"):  # only transport padding may follow a delimiter
            raise MultipartError("body", "a boundary line carries other text")
        del self._buf[: end + 2]
        self._parts += 1
        if self._parts > self._max_parts:
            raise MultipartError("files", f"more than {self._max_parts} parts in one request")
        self._state = "headers"
        return True

    def _headers(self, events: list[Event]) -> bool:
        if self._buf[:2] == b"\r\n":
            block, used = b"", 2
        else:
            at = self._buf.find(b"\r\n\r\n")
            if at < 0:
                if len(self._buf) > MAX_HEADER_BYTES:
                    raise MultipartError("body", f"a part's headers are longer than {MAX_HEADER_BYTES} bytes")
                return False
            block, used = bytes(self._buf[:at]), at + 4
        if used > MAX_HEADER_BYTES:
            raise MultipartError("body", f"a part's headers are longer than {MAX_HEADER_BYTES} bytes")
        del self._buf[:used]
        events.append(_part_start(block))
        self._state = "body"
        return True

    def _body(self, events: list[Event]) -> bool:
        at = self._buf.find(self._delimiter)
        if at >= 0:
            if at:
                events.append(PartData(bytes(self._buf[:at])))
            del self._buf[: at + len(self._delimiter)]
            events.append(PartEnd())
            self._state = "after"
            return True
        keep = len(self._delimiter) - 1  # a delimiter may begin in what is held back
        if len(self._buf) > keep:
            cut = len(self._buf) - keep
            events.append(PartData(bytes(self._buf[:cut])))
            del self._buf[:cut]
        return False


def _part_start(block: bytes) -> PartStart:
    try:
        text = block.decode("utf-8")  # browsers send file names as raw UTF-8
    except UnicodeDecodeError:
        raise MultipartError("body", "a part's headers are not UTF-8") from None
    disposition: str | None = None
    for line in text.split("\r\n"):
        name, colon, value = line.partition(":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise MultipartError("body", "a part has a malformed header line")
        if name.lower() == "content-disposition":
            if disposition is not None:
                raise MultipartError("body", "a part has two Content-Disposition headers")
            disposition = value.strip()
    if disposition is None:
        raise MultipartError("body", "a part has no Content-Disposition header")
    message = email.message.Message()
    message["content-disposition"] = disposition
    if message.get_content_disposition() != "form-data":
        raise MultipartError("body", "a part's Content-Disposition is not form-data")
    field = message.get_param("name", header="content-disposition")
    if not isinstance(field, str) or not field:
        raise MultipartError("body", "a part has no field name")
    filename = message.get_filename()
    return PartStart(name=field, filename=filename)
