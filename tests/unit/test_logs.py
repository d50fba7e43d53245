"""The log formats, the format choice, and the audit verifier on a mixed service log."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest

from docquery.api.audit import AuditLog
from docquery.cli import main as cli_main
from docquery.core.errors import ConfigError
from docquery.runtime.logs import (
    REQUEST_ID,
    JsonFormatter,
    StderrHandler,
    TextFormatter,
    check_level,
    configure_logging,
    resolve_format,
)


def audit_main(argv: list[str]) -> int:
    return cli_main(["audit", "verify", *argv])


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _record(msg: str, *args: object, name: str = "docquery.x", **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord(name, logging.INFO, __file__, 1, msg, args, None)
    for k, v in extra.items():
        setattr(rec, k, v)
    return rec


def test_json_line_fields_and_request_id_from_the_context() -> None:
    token = REQUEST_ID.set("rid-123")
    try:
        out = json.loads(JsonFormatter().format(_record("took %d ms", 5)))
    finally:
        REQUEST_ID.reset(token)
    assert out["level"] == "INFO" and out["logger"] == "docquery.x" and out["message"] == "took 5 ms"
    assert out["request_id"] == "rid-123" and out["timestamp"].endswith("+00:00")
    assert "request_id" not in json.loads(JsonFormatter().format(_record("outside a request")))


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()])
def test_exceptions_are_logged_by_type_and_frames_never_their_message(formatter: logging.Formatter) -> None:
    try:
        raise ValueError("secret document text")
    except ValueError:
        rec = logging.LogRecord("docquery.x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = formatter.format(rec)
    assert "ValueError" in line and "test_logs.py" in line
    assert "secret document text" not in line


def test_audit_records_are_objects_in_json_and_the_record_text_in_text() -> None:
    rec = {"request_id": "r1", "seq": 0}
    line = json.loads(JsonFormatter().format(_record(json.dumps(rec), name="docquery.audit", audit=rec)))
    assert line["audit"] == rec and line["request_id"] == "r1" and line["message"] == "audit record"
    assert TextFormatter().format(_record(json.dumps(rec), name="docquery.audit", audit=rec)).endswith(json.dumps(rec))


@pytest.mark.parametrize(
    ("requested", "tty", "prefer_json", "expected"),
    [
        ("auto", True, False, "text"),  # a person at a terminal
        ("auto", False, False, "json"),  # a Job log, a pipe
        ("auto", True, True, "json"),  # serve, the prod profile
        ("text", False, True, "text"),  # asked for
        ("json", True, False, "json"),
    ],
)
def test_format_choice(requested: str, tty: bool, prefer_json: bool, expected: str) -> None:
    stream = _Tty() if tty else io.StringIO()
    assert resolve_format(requested, stream=stream, prefer_json=prefer_json) == expected


def test_level_is_checked_and_configuring_twice_keeps_one_handler() -> None:
    assert check_level("debug") == "DEBUG"
    with pytest.raises(ConfigError, match="DOCQUERY_LOG_LEVEL"):
        check_level("LOUD")
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        configure_logging("INFO", "json")
        configure_logging("DEBUG", "text")
        ours = [h for h in root.handlers if isinstance(h, StderrHandler)]
        assert len(ours) == 1 and isinstance(ours[0].formatter, TextFormatter)
        assert logging.getLogger("uvicorn.error").handlers == [] and logging.getLogger("uvicorn.error").propagate
    finally:
        for h in root.handlers:
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)


def test_the_verifier_reads_a_mixed_service_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="docquery.audit")
    audit = AuditLog()
    for i in range(3):
        audit.record(request_id=f"r{i}", principal="p", method="GET", route="/v1/models", status=200, outcome="ok")
    fmt = JsonFormatter()
    audits = [fmt.format(r) for r in caplog.records if r.name == "docquery.audit"]
    other = fmt.format(_record("Started server process", name="uvicorn.error"))
    text_other = "2026-12-01 10:00:00,000 INFO uvicorn.error Application startup complete."
    path = tmp_path / "service.log"
    path.write_text("\n".join([other, audits[0], text_other, audits[1], audits[2]]) + "\n")
    assert audit_main([str(path)]) == 0

    tampered = json.loads(audits[1])
    tampered["audit"]["status"] = 500
    path.write_text("\n".join([audits[0], json.dumps(tampered), audits[2]]) + "\n")
    assert audit_main([str(path)]) == 1
    path.write_text("\n".join([audits[0], audits[2]]) + "\n")  # a record removed
    assert audit_main([str(path)]) == 1
