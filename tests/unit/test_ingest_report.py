"""Report rendering and progress output: counts only, never document text."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from ingest.report.progress import PlainProgress, RichProgress, make_progress
from ingest.report.summary import Report

CONTRACT_KEYS = {"added", "updated", "unchanged", "deleted", "failed", "chunks_written", "seconds"}


def test_json_has_the_contract_keys_and_sorted_failures() -> None:
    report = Report(added=2, chunks_written=5, seconds=1.23456)
    report.fail("/b.pdf", "encrypted PDF (password required)")
    report.fail("/a.txt", "binary content in a text file")
    out = report.as_json()
    assert set(out) >= CONTRACT_KEYS
    assert out["failed"] == [
        {"path": "/a.txt", "reason": "binary content in a text file"},
        {"path": "/b.pdf", "reason": "encrypted PDF (password required)"},
    ]
    assert out["seconds"] == 1.235 and not report.ok


def test_table_escapes_markup_in_paths() -> None:
    report = Report(unchanged=3)
    report.fail("/docs/[red]x[/red].txt", "unsupported file type '.bin'")
    buf = io.StringIO()
    report.render(Console(file=buf, width=120))
    text = buf.getvalue()
    assert "[red]x[/red].txt" in text and "unchanged" in text


def test_plain_progress_logs_counts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ingest.report.progress")
    progress = PlainProgress(interval_s=0)
    progress.start(3)
    progress.embedded(16)
    progress.written(16)
    progress.file_done()
    progress.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "ingest: 3 file(s) to index"
    assert "files 1/3, chunks written 16/?, chunks embedded 16" in lines[-1]  # no file parsed: no total yet


def test_progress_kind_follows_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert isinstance(make_progress(enabled=True, interval_s=5), PlainProgress)
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr("sys.stderr", tty)
    bars = make_progress(enabled=True, interval_s=5)
    assert isinstance(bars, RichProgress)
    bars.start(2)
    bars.embedded(4)
    bars.written(4)
    bars.file_done()
    bars.close()
