"""The parse process: loads, scans and chunks planned documents, one at a time, in order.

``ingest.prepare.parsing`` starts it as ``python -m ingest.prepare.parse_child``. Once its imports are
done it sends ``READY`` on its channel (the original stdout); then its stdin carries one frame,
``(prepare, docs)``, and the channel one outcome per document, in order: a ``PreparedDoc``, or the reason the file
cannot be indexed. A frame is an 8-byte length and a pickle. Both ends are this
program, started from the same interpreter, so the pickles are trusted.

Why a process: parsers read untrusted bytes. A parser that crashes or hangs on
one file then fails that file, and the batch goes on; in a thread it would kill
or hang the whole run. It is not faster (it costs a start and more CPU in all;
docs/design.md), so by default only parsed formats go to it (ingest.prepare.parsing).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import struct
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO, cast

from docquery import chunking
from docquery.runtime.logs import FORMATTERS, LogFormat, configure_logging
from ingest.model import FileRejected, PlannedDoc, PreparedDoc

READY = "ready"
PARENT_PID_ENV = "DOCQUERY_PARSE_PARENT_PID"
# "json:INFO": the parent's log format and level, so the child's lines on the shared stderr look like
# the parent's (off a terminal, one JSON object a line); unset, a plain format for a process run alone.
LOG_ENV = "DOCQUERY_PARSE_LOG"
# A niceness increment: a service's parse process gives way to its queries on a shared core.
NICE_ENV = "DOCQUERY_PARSE_NICE"
_HEADER = struct.Struct("!Q")

Outcome = PreparedDoc | str  # str: why the file cannot be indexed; safe to report, never file content
Prepare = Callable[[PlannedDoc], PreparedDoc]


def outcome(prepare: Prepare, planned: PlannedDoc) -> Outcome:
    try:
        return prepare(planned)
    except FileRejected as exc:
        return exc.reason
    except Exception as exc:  # a parser bug on one file must not kill the batch
        # The type only: a library's message can quote the file's content.
        return f"cannot parse file ({type(exc).__name__})"


def write_frame(fd: int, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    parts: list[bytes] = []
    while n:
        part = os.read(fd, min(n, 1 << 20))
        if not part:
            raise EOFError
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def read_frame(fd: int) -> object:
    """Raises EOFError when the other end closed (or died) before a whole frame arrived."""
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, n))  # noqa: S301  # our own parent/child, same interpreter


def _die_with_parent() -> None:
    """A killed ingest (SIGKILL, OOM) must not leave its parser running: ask Linux to kill us too."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.environ.get(PARENT_PID_ENV) != str(os.getppid()):
        os._exit(1)  # the parent died before the request took effect


def _log_warning(  # noqa: PLR0917  # warnings.showwarning's signature, called positionally
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` as one log line: the category and where, never the text,
    which runs to several lines and can quote the document."""
    del message, file, line
    logging.getLogger("py.warnings").warning("%s at %s:%d", category.__name__, Path(filename).name, lineno)


def _configure_logging(spec: str) -> None:
    fmt, _, level = spec.partition(":")
    if fmt in FORMATTERS:
        configure_logging(level or "INFO", cast(LogFormat, fmt))
    else:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s [parse] %(message)s", stream=sys.stderr
        )


def _run(channel: int, jobs: int) -> None:
    # The chunker's imports take seconds: paid before the list comes (under the parent's start timeout, or
    # while a process started ahead waits), never under a file's parse timeout.
    chunking.preload()
    write_frame(channel, READY)
    try:
        job = read_frame(jobs)
    except EOFError:
        return  # the parent went away before sending the job
    prepare, docs = cast(tuple[Prepare, Sequence[PlannedDoc]], job)
    for planned in docs:
        write_frame(channel, outcome(prepare, planned))


def main() -> int:
    _die_with_parent()
    nice = os.environ.get(NICE_ENV, "")
    if nice.isdigit():
        os.nice(int(nice))
    # Ctrl-C reaches the whole process group; the parent stops this process itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = os.dup(1)
    os.dup2(2, 1)  # a stray print in a parser library goes to stderr, not into the channel
    _configure_logging(os.environ.get(LOG_ENV, ""))
    # Off a terminal every stderr line must be a log line; warnings.showwarning would write several.
    warnings.showwarning = _log_warning
    with contextlib.suppress(BrokenPipeError):  # the parent stopped reading: it is shutting down
        _run(channel, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
