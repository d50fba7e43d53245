"""Progress reporting: a rich bar on a terminal, periodic log lines otherwise (a Job log).

Off a terminal the lines go through the ``docquery.evaluation.progress`` logger, so they take the
log format (JSON when stderr is not a terminal, docs/api.md "Logs") and a collected stderr parses
line by line, as ingest's progress does (ingest/report/progress.py; docquery may not import it).
Lines carry a label and counts only, never document or query text.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from rich.console import Console

log = logging.getLogger("docquery.evaluation.progress")


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
    """One line per ``every_s`` seconds or 10 % step, whichever comes later; and one at the end.

    Written to ``stream`` (a script's own output, benchmarks/retrieval_eval.py); ``LogProgress`` logs them.
    """

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


class LogProgress(LineProgress):
    """``LineProgress`` lines as INFO records of the ``docquery.evaluation.progress`` logger."""

    def __init__(self, *, every_s: float = 10.0) -> None:
        super().__init__(sys.stderr, every_s=every_s)

    def _write(self, line: str) -> None:
        log.info("%s", line)


class RichProgress:
    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            # stderr, never rich's default stdout: `--json > out.json` on a terminal must get the JSON only.
            console=console or Console(stderr=True),
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
    """A bar when ``stream`` (default stderr) is a terminal, else log lines."""
    out = stream or sys.stderr
    if out.isatty():
        from rich.console import Console

        return RichProgress(Console(file=out))
    return LogProgress()
