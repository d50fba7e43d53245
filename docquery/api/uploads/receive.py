"""Reading an upload request: the multipart body, streamed into the spool within every bound as it arrives.

Fields: ``files`` (one part per file, each with a file name), ``groups`` (text) and ``public`` (text),
each text field at most once. A file past ``uploads.max_file_bytes`` is 413 at the byte that passes it,
before the rest is read; a malformed body, an unknown or repeated field, a missing, hostile or repeated
file name, or too many files is 400 or 422 naming the field. Whatever the outcome, a refused request
leaves nothing in the spool.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from docquery.api.errors import ApiError
from docquery.api.uploads.multipart import MultipartError, MultipartParser, PartData, PartEnd, PartStart, boundary_of
from docquery.api.uploads.spool import Spool
from docquery.config.settings import UploadSettings
from docquery.validation import InvalidRequest, upload_file_name

FILES = "files"
# ``corpus``: sent by ``docquery ingest --server``, where each file came from (docquery.api.uploads.handover).
TEXT_FIELDS = ("groups", "public", "corpus")
MAX_TEXT_BYTES = 8192
MAX_CORPUS_BYTES = 1 << 20


@dataclass(frozen=True)
class SpooledFile:
    name: str
    rel: str  # relative to the spool
    size: int


@dataclass
class Received:
    job_id: str
    files: list[SpooledFile] = field(default_factory=list)
    text: dict[str, str] = field(default_factory=dict)


def _refused(exc: MultipartError) -> ApiError:
    status = 400 if exc.field == "body" else 422
    return ApiError(status, f"invalid request: {exc.field}: {exc.reason}")


class _Reader:
    def __init__(self, spool: Spool, cfg: UploadSettings, job_id: str) -> None:
        self.spool, self.cfg = spool, cfg
        self.got = Received(job_id)
        self.fd: int | None = None
        self.file: tuple[str, str] | None = None  # (name, rel) of the file being written
        self.size = 0
        self.text_name: str | None = None
        self.text = bytearray()
        self.names: set[str] = set()

    def start(self, part: PartStart) -> None:
        if part.name == FILES:
            self._start_file(part.filename)
        elif part.name in TEXT_FIELDS:
            if part.filename is not None:
                raise MultipartError(part.name, "must be a text field, not a file")
            if part.name in self.got.text:
                raise MultipartError(part.name, "given more than once")
            self.text_name = part.name
            self.text.clear()
        else:
            raise MultipartError("body", "unknown field (expected files, groups, public or corpus)")

    def _start_file(self, filename: str | None) -> None:
        n = len(self.got.files)
        where = f"{FILES}[{n}]"
        if n >= self.cfg.max_files:
            raise MultipartError(FILES, f"more than {self.cfg.max_files} files in one request")
        try:
            name = upload_file_name(filename or "", self.cfg.max_name_bytes, where)
        except InvalidRequest as exc:
            raise MultipartError(exc.field, exc.reason) from None
        if name in self.names:
            raise MultipartError(where, "the same file name twice in one request")
        self.names.add(name)
        self.fd, rel = self.spool.create(self.got.job_id, n, name)
        self.file, self.size = (name, rel), 0

    def data(self, chunk: bytes) -> None:
        if self.fd is not None:
            self.size += len(chunk)
            if self.size > self.cfg.max_file_bytes:
                raise ApiError(
                    413,
                    f"{FILES}[{len(self.got.files)}]: larger than {self.cfg.max_file_bytes} bytes",
                    headers={"Connection": "close"},
                )
            view = memoryview(chunk)
            while view:
                view = view[os.write(self.fd, view) :]
        elif self.text_name is not None:
            self.text += chunk
            bound = MAX_CORPUS_BYTES if self.text_name == "corpus" else MAX_TEXT_BYTES
            if len(self.text) > bound:
                raise MultipartError(self.text_name, f"longer than {bound} bytes")

    def end(self) -> None:
        if self.fd is not None and self.file is not None:
            self.close()
            self.got.files.append(SpooledFile(self.file[0], self.file[1], self.size))
        elif self.text_name is not None:
            try:
                self.got.text[self.text_name] = self.text.decode("utf-8")
            except UnicodeDecodeError:
                raise MultipartError(self.text_name, "not UTF-8 text") from None
        self.file, self.text_name = None, None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


async def receive(
    stream: AsyncIterator[bytes], content_type: str | None, spool: Spool, cfg: UploadSettings
) -> Received:
    """Reads the whole body into the spool; raises ApiError (and leaves nothing spooled) when it is refused."""
    try:
        boundary = boundary_of(content_type)
    except MultipartError as exc:
        raise _refused(exc) from None
    job_id = spool.new_job()
    reader = _Reader(spool, cfg, job_id)
    # Each file, and at most one of each text field, plus a part to name an unknown field by.
    parser = MultipartParser(boundary, max_parts=cfg.max_files + len(TEXT_FIELDS) + 1)
    try:
        async for chunk in stream:
            if parser.done:
                break  # what follows the closing boundary (an epilogue) is not read
            for event in parser.feed(chunk):
                if isinstance(event, PartStart):
                    reader.start(event)
                elif isinstance(event, PartData):
                    reader.data(event.data)
                elif isinstance(event, PartEnd):
                    reader.end()
        parser.finish()
        if not reader.got.files:
            raise MultipartError(FILES, "no file given (send each file as a part named files)")
        return reader.got
    except MultipartError as exc:
        reader.close()
        spool.remove_job(job_id)
        raise _refused(exc) from None
    except OSError as exc:
        reader.close()
        spool.remove_job(job_id)
        # The spool's disk, not the request: full, or not writable. The reason is the errno's name only.
        raise ApiError(
            503,
            f"the upload spool cannot take the files now ({exc.strerror or type(exc).__name__})",
            type_="unavailable",
            headers={"Retry-After": "60"},
        ) from None
    except BaseException:
        reader.close()
        spool.remove_job(job_id)
        raise
