"""Parse planned documents in order: in the caller's thread, or in a parse process.

``DOCQUERY_INGEST__PARSE_PROCESS`` picks which files go to the process:

- ``auto`` (default): every format that is parsed (PDF with pypdf, DOCX with
  python-docx and lxml, HTML with BeautifulSoup and lxml, Markdown and
  reStructuredText with DocQuery's own line parsers): no parser of untrusted input runs without the
  time limit. Plain text (and files sniffed as text) is only decoded, in linear
  time within the size limits, in the caller's thread, because the process costs
  a plain-text corpus time and gives it nothing (docs/design.md).
- ``all``: every file. ``off``: none, so a parser hang hangs the run.

The process (``ingest.prepare.parse_child``) gets its whole list at once and works ahead
of the caller; the pipe between them bounds how far. A service keeps one process started ahead
(``Standby``), so a batch does not wait the seconds the chunker's imports take; each batch still
gets a process of its own. When it dies on a file (a
parser crash, the kernel's OOM killer) or takes longer than the timeout, that
file is reported and a new process takes the rest of the list. Only a process
that cannot start at all stops the run.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import IO, Literal, cast

from docquery.core.errors import DocQueryError
from docquery.runtime.logs import configured
from ingest.model import PlannedDoc, PreparedDoc
from ingest.prepare.parse_child import (
    LOG_ENV,
    NICE_ENV,
    PARENT_PID_ENV,
    READY,
    Outcome,
    Prepare,
    outcome,
    read_frame,
    write_frame,
)

CHILD_ARGV = (sys.executable, "-m", "ingest.prepare.parse_child")
ParseMode = Literal["auto", "all", "off"]
PARSED_KINDS = frozenset({".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".rst"})
_START_TIMEOUT_S = 120.0
_POLL_S = 0.1
log = logging.getLogger("ingest")


class ParseProcessError(DocQueryError):
    """The parse process could not start, or broke its protocol."""


@dataclass(frozen=True)
class _Lost:
    reason: str


def isolated(mode: ParseMode) -> Callable[[PlannedDoc], bool]:
    """Which files ``mode`` sends to the parse process."""
    if mode == "all":
        return lambda planned: True
    if mode == "off":
        return lambda planned: False
    return lambda planned: (planned.source.kind or planned.source.path.suffix.lower()) in PARSED_KINDS


def routed(
    docs: Sequence[PlannedDoc],
    prepare: Prepare,
    *,
    isolate: Callable[[PlannedDoc], bool],
    timeout_s: float,
    stop: threading.Event,
    argv: Sequence[str] = CHILD_ARGV,
    standby: Standby | None = None,
) -> Generator[tuple[PlannedDoc, Outcome], None, None]:
    """Outcomes in the order of ``docs``: those ``isolate`` picks from a parse process (started
    only if there are any), the others parsed here. Ends early when ``stop`` is set."""
    to_process = [isolate(planned) for planned in docs]  # asked once per file
    picked = [planned for planned, yes in zip(docs, to_process, strict=True) if yes]
    from_process = in_process(picked, prepare, timeout_s=timeout_s, stop=stop, argv=argv, standby=standby)
    with closing(from_process):  # closing the generator stops the process
        for planned, yes in zip(docs, to_process, strict=True):
            if not yes:
                yield planned, outcome(prepare, planned)
                continue
            got = next(from_process, None)
            if got is None:
                return  # stopped
            yield got


def in_process(
    docs: Sequence[PlannedDoc],
    prepare: Prepare,
    *,
    timeout_s: float,
    stop: threading.Event,
    argv: Sequence[str] = CHILD_ARGV,
    standby: Standby | None = None,
) -> Generator[tuple[PlannedDoc, Outcome], None, None]:
    """Outcomes in the order of ``docs``. Ends early when ``stop`` is set; closing it stops the process.

    ``prepare`` must pickle (a module-level function, or a ``functools.partial`` of one).
    The first process is ``standby``'s when it has one started (and no file needs a held folder).
    Raises ParseProcessError when a process cannot start.
    """
    pos = 0
    ahead = standby.take() if standby is not None and docs and not _held(docs) else None
    while pos < len(docs):
        child = _Child(argv, prepare, docs[pos:], stop, started=ahead)
        ahead = None
        try:
            while pos < len(docs):
                got = child.next_outcome(timeout_s, stop)
                if got is None:
                    return  # stopped
                planned = docs[pos]
                pos += 1
                if isinstance(got, _Lost):
                    yield planned, got.reason
                    break  # a fresh process takes the rest
                yield planned, got
        finally:
            child.close()


def _held(docs: Sequence[PlannedDoc]) -> list[int]:
    """The folders held since discovery: the child opens each file relative to its folder's descriptor, at
    the same number, never by a path it would resolve again."""
    return sorted({d.source.dir_fd for d in docs if d.source.dir_fd is not None})


def _start(argv: Sequence[str], held: Sequence[int] = (), nice: int = 0) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        # The child imports what this process imports, from the same places.
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        PARENT_PID_ENV: str(os.getpid()),
        # One document at a time is too little work for the tokenizer's thread pool;
        # its threads would only take cores from the embedder.
        "TOKENIZERS_PARALLELISM": "false",
    }
    logs = configured()
    if logs is not None:
        env[LOG_ENV] = ":".join(logs)  # the child's lines share this stderr: the same format
    if nice:
        env[NICE_ENV] = str(nice)
    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, pass_fds=held)  # noqa: S603


class Standby:
    """One parse process started ahead of the batch that will take it, at ``nice`` (a service lowers it below
    its queries). It has done its imports and waits for its list. ``refill`` starts the next one after a
    batch, so its imports do not compete with the batch's work.

    The process is started by a thread of its own that lives as long as this object is used: Linux kills a
    parse process when the thread that started it ends (parse_child's ``PR_SET_PDEATHSIG``), and a caller's
    thread (a pool's) may end first.
    """

    def __init__(self, *, nice: int = 0, argv: Sequence[str] = CHILD_ARGV) -> None:
        self._argv, self._nice = tuple(argv), nice
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._starter: threading.Thread | None = None
        self._closed = False

    def refill(self) -> None:
        """Start a process unless one is waiting (in the background: this returns at once)."""
        with self._lock:
            if self._closed:
                return
            if self._starter is None:
                self._starter = threading.Thread(target=self._keep, name="parse-standby", daemon=True)
                self._starter.start()
        self._wanted.set()

    def _keep(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            with self._lock:
                if self._closed:
                    return
                if self._proc is not None and self._proc.poll() is None:
                    continue
                dead, self._proc = self._proc, None
            if dead is not None:
                _reap(dead)
            try:
                proc = _start(self._argv, nice=self._nice)
            except OSError as exc:  # the batch that wants one starts its own, and says why if it cannot
                log.warning("parse process not started ahead (%s)", type(exc).__name__)
                continue
            if not self._adopt(proc):
                return

    def _adopt(self, proc: subprocess.Popen[bytes]) -> bool:
        """Keep ``proc`` as the waiting process; False (and it is ended) when closed while it started."""
        with self._lock:
            if not self._closed:
                self._proc = proc
                return True
        _reap(proc)
        return False

    def ready(self) -> bool:
        """A process is waiting and has said READY (its imports are done); nothing is read from it."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None or proc.stdout is None:
                return False
            readable, _, _ = select.select([proc.stdout.fileno()], [], [], 0)
            return bool(readable)

    def take(self) -> subprocess.Popen[bytes] | None:
        """The waiting process, or None (none yet, or it died: the caller starts one of its own)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is not None:
            _reap(proc)
            return None
        return proc

    def close(self) -> None:
        """Ends the waiting process and the thread that starts them; ``refill`` does nothing after."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
            starter = self._starter
        self._wanted.set()
        if proc is not None:
            _reap(proc)
        if starter is not None and starter is not threading.current_thread():
            starter.join()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()  # done, stopped, or stuck: nothing of its state is needed
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


class _Child:
    def __init__(
        self,
        argv: Sequence[str],
        prepare: Prepare,
        docs: Sequence[PlannedDoc],
        stop: threading.Event,
        *,
        started: subprocess.Popen[bytes] | None = None,
    ) -> None:
        # A process started ahead that fails to become ready is replaced once by one of our own.
        for proc in (started, None) if started is not None else (None,):
            self.proc = proc if proc is not None else _start(argv, _held(docs))
            stdout = cast(IO[bytes], self.proc.stdout)
            self.fd = stdout.fileno()
            try:
                first = self._read(_START_TIMEOUT_S, stop)
                if first == READY:
                    # The list goes once the process is ready, so a process that never reads cannot block it.
                    stdin = cast(IO[bytes], self.proc.stdin)
                    write_frame(stdin.fileno(), (prepare, list(docs)))
                    stdin.close()
            except BrokenPipeError:
                first = _Lost(f"parser process died ({self._exit_status()})")
            except BaseException:
                self.close()
                raise
            if first == READY or first is None:  # None: stopped; the caller's next read ends it
                return
            self.close()
        what = first.reason if isinstance(first, _Lost) else "unexpected first frame"
        raise ParseProcessError(f"parse process did not start: {what}")

    def _read(self, timeout_s: float, stop: threading.Event) -> object | None:
        """The next frame; None when stopped, ``_Lost`` when the process died or timed out."""
        deadline = time.monotonic() + timeout_s
        while True:
            if stop.is_set():
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return _Lost(f"parsing took longer than {timeout_s:g} s")
            ready, _, _ = select.select([self.fd], [], [], min(left, _POLL_S))
            if ready:
                break
        try:
            return read_frame(self.fd)
        except EOFError:
            return _Lost(f"parser process died ({self._exit_status()})")

    def next_outcome(self, timeout_s: float, stop: threading.Event) -> Outcome | _Lost | None:
        got = self._read(timeout_s, stop)
        if got is None or isinstance(got, (_Lost, str)):
            return got
        if not isinstance(got, PreparedDoc):
            raise ParseProcessError("parse process broke the protocol (unexpected frame)")
        return got

    def _exit_status(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def close(self) -> None:
        _reap(self.proc)
