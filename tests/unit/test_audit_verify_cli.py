"""``docquery audit verify``: an empty, wrong or missing input is never "ok" (docs/api.md, "Audit log")."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from docquery.api.audit import AuditLog
from docquery.cli import main as cli_main


def audit_main(argv: list[str]) -> int:
    return cli_main(["audit", "verify", *argv])


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"2026-11-29 12:00:00 INFO docquery.audit {record.getMessage()}")


def _audit_log(path: Path, n: int = 3) -> Path:
    logger = logging.getLogger("tests.audit_verify_cli")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = _Lines()
    logger.addHandler(handler)
    try:
        audit = AuditLog(logger)
        for i in range(n):
            audit.record(request_id=f"r{i}", principal="p", method="GET", route="/v1/models", status=200, outcome="ok")
    finally:
        logger.removeHandler(handler)
    path.write_text("".join(line + "\n" for line in handler.lines), encoding="utf-8")
    return path


def test_an_intact_log_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert audit_main([str(_audit_log(tmp_path / "service.log"))]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] is True and verdict["records"] == 3 and list(verdict["chains"].values()) == [3]


def test_no_file_is_usage_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        audit_main([])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: docquery audit verify") and "FILE" in err


def test_a_missing_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _audit_log(tmp_path / "service.log")
    missing = tmp_path / "service.log.1"
    assert audit_main([str(good), str(missing)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"docquery audit verify: cannot read {missing}: No such file or directory; give the path of a readable log file"
    ]
    assert out == ""  # no verdict about files it could not read


def test_a_directory_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert audit_main([str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


@pytest.mark.parametrize("content", ["myhost\n", "", '{"level":"INFO","logger":"docquery.cli","message":"x"}\n'])
def test_no_audit_record_is_not_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    path = tmp_path / "hostname"
    path.write_text(content, encoding="utf-8")
    assert audit_main([str(path)]) == 4
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] is False
    assert err.splitlines() == [
        "docquery audit verify: no audit records were found in the given files (1): check that they are "
        "the service's log (lines of the docquery.audit logger), or pass --allow-empty if none are expected"
    ]


def test_allow_empty_accepts_a_log_without_audit_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "quiet.log"
    path.write_text("", encoding="utf-8")
    assert audit_main(["--allow-empty", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "records": 0, "chains": {}}


def test_allow_empty_does_not_hide_a_broken_chain(tmp_path: Path) -> None:
    path = _audit_log(tmp_path / "service.log")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text(lines[0] + lines[2], encoding="utf-8")  # the middle record deleted
    assert audit_main(["--allow-empty", str(path)]) == 1


@pytest.mark.slow  # runs a subprocess
def test_as_a_module_no_traceback(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "docquery.cli", "audit", "verify", str(tmp_path / "nonexistent.log")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and len(run.stderr.splitlines()) == 1
