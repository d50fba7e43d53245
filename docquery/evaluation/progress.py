"""Progress reporting: a rich bar on a terminal, plain periodic lines in a Job log.

Lines carry a label and counts only, never document or query text.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO


class Progress(Protocol):
    def start(self, label: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def finish(self) -> None: ...


class NullProgress:
    def start(self, label: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


class LineProgress:
    """One line per ``every_s`` seconds or 10 % step, whichever comes later; and one at the end."""

    def __init__(self, stream: TextIO, *, every_s: float = 10.0) -> None:
        self._stream = stream
        self._every_s = every_s
        self._label = ""
        self._total = 0
        self._done = 0
        self._started = 0.0
        self._last_line = 0.0
        self._last_pct = 0

    def start(self, label: str, total: int) -> None:
        self._label, self._total, self._done = label, total, 0
        self._started = self._last_line = time.monotonic()
        self._last_pct = 0
        self._write(f"{label}: 0/{total}")

    def advance(self, n: int = 1) -> None:
        self._done += n
        now = time.monotonic()
        pct = (100 * self._done // self._total) if self._total else 100
        if pct >= self._last_pct + 10 and now - self._last_line >= self._every_s:
            self._last_pct, self._last_line = pct, now
            self._write(f"{self._label}: {self._done}/{self._total} ({pct}%)")

    def finish(self) -> None:
        elapsed = time.monotonic() - self._started
        self._write(f"{self._label}: {self._done}/{self._total} done in {elapsed:.1f}s")

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class RichProgress:
    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            transient=False,
        )
        self._task: Any = None

    def start(self, label: str, total: int) -> None:
        if self._task is None:
            self._bar.start()
        self._task = self._bar.add_task(label, total=total)

    def advance(self, n: int = 1) -> None:
        self._bar.advance(self._task, n)

    def finish(self) -> None:
        self._bar.refresh()

    def close(self) -> None:
        self._bar.stop()


def default_progress(stream: TextIO | None = None) -> Progress:
    out = stream or sys.stderr
    return RichProgress() if out.isatty() else LineProgress(out)
