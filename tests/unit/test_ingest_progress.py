"""A chunk total (estimated until every file is parsed) and an ETA from the start, lines while an embed
call runs, unwrapped plain report lines, and one report."""

from __future__ import annotations

import io
import logging
import time
from pathlib import Path

import pytest
from rich.console import Console

from docquery.cli import build_parser
from docquery.config.settings import Settings
from ingest.cli import run
from ingest.report.progress import Counts, PlainProgress, RichProgress
from ingest.report.summary import Report
from tests.support.fakes import HashEmbedder


def test_chunk_total_is_estimated_from_the_first_parsed_file_then_exact() -> None:
    c = Counts(files_total=10)
    assert c.chunk_total() == (None, False)
    c.parsed_files, c.parsed_chunks = 2, 8
    assert c.chunk_total() == (40, False)
    c.written = 8
    assert c.eta_s(elapsed=4.0) == pytest.approx(16.0)  # 32 left at 2 chunks/s
    c.parsed_files, c.parsed_chunks = 10, 37
    assert c.chunk_total() == (37, True)


@pytest.mark.slow  # counts the ticker's lines in 0.3 s
def test_plain_lines_show_the_total_eta_and_an_embed_call_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ingest.report.progress")
    progress = PlainProgress(interval_s=0.05)
    progress.start(4)
    progress.prepared(6)
    progress.embedding(6)
    time.sleep(0.3)  # no event: the ticker still writes lines
    progress.embedded(6)
    progress.written(6)
    progress.file_done()
    progress.close()
    lines = [r.getMessage() for r in caplog.records]
    waiting = [line for line in lines if "embedding 6 for" in line]
    assert len(waiting) >= 2, lines
    assert "chunks written 0/~24" in waiting[0]
    assert "files 1/4, chunks written 6/~24" in lines[-1] and "eta " in lines[-1] and "eta ?" not in lines[-1]


def test_rich_bar_has_a_total_as_soon_as_a_file_is_parsed() -> None:
    buf = io.StringIO()
    bars = RichProgress(console=Console(file=buf, force_terminal=True, width=160))
    bars.start(3)
    bars.prepared(5)
    chunks = bars._bars.tasks[1]
    assert chunks.total == 15 and "estimated" in chunks.fields["note"]
    bars.embedding(5)
    assert bars.in_flight().startswith("embedding 5 chunks")
    bars.embedded(5)
    bars.written(5)
    bars.file_done()
    bars.prepared(5)
    bars.prepared(2)
    assert chunks.total == 12 and "estimated" not in chunks.fields["note"]
    bars.close()
    assert chunks.total == chunks.completed == 5


@pytest.mark.parametrize(
    "path", ["/d/" + "x" * 300 + ".pdf", "/d/new\nline.txt", "/d/\x1b[2Jclear.txt", "/d/\u202eevil"]
)
def test_plain_report_lines_are_whole_and_escaped(path: str) -> None:
    report = Report(added=1)
    report.fail(path, "encrypted PDF (password required) " + "and more words " * 10)
    lines = report.plain_lines()
    assert len(lines) == 2 and lines[0].startswith("docquery ingest: added=1 ")
    assert lines[1].startswith("failed /d/") and lines[1].endswith("and more words ")
    assert "\n" not in lines[1] and "\x1b" not in lines[1] and "\u202e" not in lines[1]


def test_the_report_is_printed_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Expense reports are due within 30 days.")
    args = build_parser().parse_args(["ingest", str(tmp_path / "docs"), "--groups", "staff"])
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "none")
    assert run(args, settings, embedder=HashEmbedder()) == 0
    out = capsys.readouterr().out
    # stdout is a pipe here: plain lines, the counts once, then what decided the ACL
    assert out.count("added=1") == 1 and out.splitlines()[1:] == ["acl-from --groups: 1 document(s)"]
    assert not any("added=1" in r.getMessage() for r in caplog.records)
