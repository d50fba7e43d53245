"""Progress: rich bars on a terminal, plain periodic log lines otherwise (a Job log).

Lines carry counts, rates and durations only, never document text.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Protocol

log = logging.getLogger("ingest.progress")


class Progress(Protocol):
    def start(self, files: int) -> None: ...

    def embedded(self, chunks: int) -> None: ...

    def written(self, chunks: int) -> None: ...

    def file_done(self) -> None: ...

    def close(self) -> None: ...


class NullProgress:
    def start(self, files: int) -> None:
        pass

    def embedded(self, chunks: int) -> None:
        pass

    def written(self, chunks: int) -> None:
        pass

    def file_done(self) -> None:
        pass

    def close(self) -> None:
        pass


class PlainProgress:
    """One log line at most every ``interval_s`` seconds (0: on every event), plus a final one."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self._interval = interval_s
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._last = 0.0
        self._files_total = self._files = self._embedded = self._written = 0

    def start(self, files: int) -> None:
        self._t0 = time.monotonic()
        self._files_total = files
        log.info("ingest: %d file(s) to index", files)

    def embedded(self, chunks: int) -> None:
        with self._lock:
            self._embedded += chunks
        self._maybe_log()

    def written(self, chunks: int) -> None:
        with self._lock:
            self._written += chunks
        self._maybe_log()

    def file_done(self) -> None:
        with self._lock:
            self._files += 1
        self._maybe_log()

    def _maybe_log(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last < self._interval:
                return
            self._last = now
            elapsed = max(now - self._t0, 1e-9)
            files, total, emb, wrote = self._files, self._files_total, self._embedded, self._written
        log.info(
            "ingest progress: files %d/%d, chunks embedded %d, chunks written %d, %.1f chunks/s, %.1fs",
            files,
            total,
            emb,
            wrote,
            emb / elapsed,
            elapsed,
        )

    def close(self) -> None:
        self._maybe_log(force=True)


class RichProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bars

        self._bars = Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._files = self._bars.add_task("files ", total=None, rate="")
        self._chunks = self._bars.add_task("chunks", total=None, rate="")
        self._t0 = time.monotonic()
        self._embedded = 0

    def start(self, files: int) -> None:
        self._t0 = time.monotonic()
        self._bars.update(self._files, total=files)
        self._bars.start()

    def embedded(self, chunks: int) -> None:
        self._embedded += chunks
        rate = self._embedded / max(time.monotonic() - self._t0, 1e-9)
        self._bars.update(self._chunks, rate=f"{rate:.1f} chunks/s embedded")

    def written(self, chunks: int) -> None:
        self._bars.update(self._chunks, advance=chunks)

    def file_done(self) -> None:
        self._bars.advance(self._files)

    def close(self) -> None:
        self._bars.update(self._chunks, total=self._bars.tasks[1].completed)
        self._bars.stop()


def make_progress(*, enabled: bool, interval_s: float) -> Progress:
    if not enabled:
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return PlainProgress(interval_s)
