"""Progress: rich bars on a terminal, plain periodic log lines otherwise (a Job log).

The chunk total is known only once every file is parsed; until then both show an
estimate (chunks per parsed file times the files), marked ``~``, so an ETA exists
from the first file on. An embed call can take tens of seconds, so the display
shows the call in flight and its age, and plain lines keep coming every
``interval_s`` even when no event arrives. Lines carry counts, rates and
durations only, never document text.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as Bars
from rich.text import Text

log = logging.getLogger("ingest.report.progress")


class Progress(Protocol):
    def start(self, files: int) -> None: ...

    def prepared(self, chunks: int) -> None: ...

    def embedding(self, chunks: int) -> None: ...

    def embedded(self, chunks: int) -> None: ...

    def written(self, chunks: int) -> None: ...

    def file_done(self) -> None: ...

    def close(self) -> None: ...


class NullProgress:
    def start(self, files: int) -> None:
        pass

    def prepared(self, chunks: int) -> None:
        pass

    def embedding(self, chunks: int) -> None:
        pass

    def embedded(self, chunks: int) -> None:
        pass

    def written(self, chunks: int) -> None:
        pass

    def file_done(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class Counts:
    """What both displays show, and the estimate they share."""

    files_total: int = 0
    files: int = 0
    parsed_files: int = 0
    parsed_chunks: int = 0
    embedded: int = 0
    written: int = 0
    in_flight: int = 0  # chunks in the embed call running now
    call_started: float = 0.0

    def chunk_total(self) -> tuple[int | None, bool]:
        """(total, exact): exact once every file is parsed; before, chunks per parsed file times the files."""
        if self.parsed_files == 0:
            return None, False
        if self.parsed_files >= self.files_total:
            return self.parsed_chunks, True
        estimate = round(self.parsed_chunks * self.files_total / self.parsed_files)
        return max(estimate, self.parsed_chunks), False

    def eta_s(self, elapsed: float) -> float | None:
        total, _ = self.chunk_total()
        if total is None or self.written == 0 or elapsed <= 0:
            return None
        return max(total - self.written, 0) / (self.written / elapsed)


class _Counting:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = Counts()
        self._t0 = time.monotonic()

    def _start(self, files: int) -> None:
        self._t0 = time.monotonic()
        with self._lock:
            self.counts.files_total = files

    def prepared(self, chunks: int) -> None:
        with self._lock:
            self.counts.parsed_files += 1
            self.counts.parsed_chunks += chunks
        self._changed()

    def embedding(self, chunks: int) -> None:
        with self._lock:
            self.counts.in_flight = chunks
            self.counts.call_started = time.monotonic()
        self._changed()

    def embedded(self, chunks: int) -> None:
        with self._lock:
            self.counts.embedded += chunks
            self.counts.in_flight = 0
        self._changed()

    def written(self, chunks: int) -> None:
        with self._lock:
            self.counts.written += chunks
        self._changed()

    def file_done(self) -> None:
        with self._lock:
            self.counts.files += 1
        self._changed()

    def _changed(self) -> None:
        pass


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class PlainProgress(_Counting):
    """One log line at most every ``interval_s`` seconds (0: on every event), a line every ``interval_s``
    while nothing happens (an embed call in flight), and a final one."""

    def __init__(self, interval_s: float = 10.0) -> None:
        super().__init__()
        self._interval = interval_s
        self._last = 0.0
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def start(self, files: int) -> None:
        self._start(files)
        log.info("ingest: %d file(s) to index", files)
        if self._interval > 0:
            self._ticker = threading.Thread(target=self._tick, name="ingest-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            self._maybe_log()

    def _changed(self) -> None:
        self._maybe_log()

    def _maybe_log(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last < self._interval:
                return
            self._last = now
            c = Counts(**vars(self.counts))
        elapsed = max(now - self._t0, 1e-9)
        total, exact = c.chunk_total()
        of = "?" if total is None else f"{'' if exact else '~'}{total}"
        busy = f", embedding {c.in_flight} for {now - c.call_started:.0f}s" if c.in_flight else ""
        log.info(
            "ingest progress: files %d/%d, chunks written %d/%s, chunks embedded %d, %.1f chunks/s, eta %s, %.1fs%s",
            c.files, c.files_total, c.written, of, c.embedded, c.written / elapsed,
            _duration(c.eta_s(elapsed)), elapsed, busy,
        )  # fmt: skip

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        self._maybe_log(force=True)


class RichProgress(_Counting):
    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self._bars = Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeRemainingColumn(),
            TimeElapsedColumn(),
            _InFlight(self),
            console=console or Console(stderr=True),
            transient=False,
            speed_estimate_period=300,  # an ETA across embed calls that come ~30 s apart
        )
        self._files = self._bars.add_task("files ", total=None, note="")
        self._chunks = self._bars.add_task("chunks", total=None, note="")
        self.chunk_task = self._chunks

    def start(self, files: int) -> None:
        self._start(files)
        self._bars.update(self._files, total=files)
        self._bars.start()

    def in_flight(self) -> str:
        with self._lock:
            n, since = self.counts.in_flight, self.counts.call_started
        return f"embedding {n} chunks, {time.monotonic() - since:.0f}s" if n else ""

    def _changed(self) -> None:
        with self._lock:
            c = Counts(**vars(self.counts))
        total, exact = c.chunk_total()
        rate = c.embedded / max(time.monotonic() - self._t0, 1e-9)
        note = f"{rate:.1f}/s" + ("" if exact or total is None else " (total estimated)")
        self._bars.update(self._chunks, total=total, completed=c.written, note=note)
        self._bars.update(self._files, completed=c.files)

    def close(self) -> None:
        with self._lock:
            written = self.counts.written
        self._bars.update(self._chunks, total=written, completed=written, note="")
        self._bars.stop()


class _InFlight(ProgressColumn):
    """Re-rendered on every refresh, so the age of the running embed call ticks between events."""

    def __init__(self, owner: RichProgress) -> None:
        super().__init__()
        self._owner = owner

    def render(self, task: Task) -> Text:
        return Text(self._owner.in_flight() if task.id == self._owner.chunk_task else "", style="dim")


def make_progress(*, enabled: bool, interval_s: float) -> Progress:
    if not enabled:
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return PlainProgress(interval_s)
