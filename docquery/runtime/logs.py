"""Log setup for every command: one JSON object per line, or plain text; level and format from settings.

JSON lines carry ``timestamp``, ``level``, ``logger``, ``message``, ``request_id``
(inside a request) and, for audit records, the record itself as ``audit`` (an
object, so ``python -m docquery.api.audit`` reads the service's log as written).
uvicorn's loggers are configured here too (no handler of their own, so they
propagate to this one), and ``docquery serve`` tells uvicorn not to configure
logging itself, so every line of ``docquery serve`` has one format.

Exceptions are logged as their type and stack frames only: an exception's message
can carry document or question text (docs/api.md, "Logs").
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TextIO, cast

from docquery.core.errors import ConfigError

LogFormat = Literal["json", "text"]

# Set by the request middleware for the duration of a request; read by the formatters.
REQUEST_ID: ContextVar[str | None] = ContextVar("docquery_request_id", default=None)

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


def _request_id(record: logging.LogRecord) -> str | None:
    rid = getattr(record, "request_id", None) or REQUEST_ID.get()
    audit = getattr(record, "audit", None)
    if not rid and isinstance(audit, dict):
        rid = audit.get("request_id")
    return str(rid) if rid else None


def _frames(exc_info: Any) -> str:
    """``Type`` plus ``file:line in function`` frames; never the exception's message."""
    exc_type, _, tb = exc_info
    frames = "; ".join(f"{f.filename}:{f.lineno} in {f.name}" for f in traceback.extract_tb(tb))
    return f"{exc_type.__name__} at {frames}" if frames else exc_type.__name__


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        audit = getattr(record, "audit", None)
        is_audit = isinstance(audit, dict)
        out: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            # An audit record's message is the record itself, written below as an object.
            "message": "audit record" if is_audit else record.getMessage(),
        }
        rid = _request_id(record)
        if rid:
            out["request_id"] = rid
        if is_audit:
            out["audit"] = audit
        if record.exc_info and record.exc_info[0] is not None:
            out["exception"] = _frames(record.exc_info)
        return json.dumps(out, separators=(",", ":"), ensure_ascii=True, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = _request_id(record)
        if rid and getattr(record, "audit", None) is None and rid not in line:
            line += f" request_id={rid}"
        return line

    def formatException(self, ei: Any) -> str:  # noqa: N802 (logging's name)
        return _frames(ei)


FORMATTERS: dict[str, type[logging.Formatter]] = {"json": JsonFormatter, "text": TextFormatter}


def resolve_format(requested: str, *, stream: TextIO, prefer_json: bool) -> LogFormat:
    """``auto``: text on a terminal, else JSON; ``prefer_json`` (serve, the prod profile) makes it JSON."""
    if requested in ("json", "text"):
        return requested  # type: ignore[return-value]
    if prefer_json:
        return "json"
    return "text" if stream.isatty() else "json"


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record (tests swap it), like logging's last resort."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def check_level(level: str) -> str:
    name = level.strip().upper()
    if not isinstance(logging.getLevelName(name), int):
        raise ConfigError(f"DOCQUERY_LOG_LEVEL={level!r} is not a level: use DEBUG, INFO, WARNING or ERROR")
    return name


def configured() -> tuple[LogFormat, str] | None:
    """The format and level ``configure_logging`` gave the root logger (None before it ran), so a child
    process can log its lines the same way onto the same stderr."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, StderrHandler):
            for name, formatter in FORMATTERS.items():
                if type(handler.formatter) is formatter:
                    return cast(LogFormat, name), logging.getLevelName(root.level)
    return None


def configure_logging(level: str, fmt: LogFormat) -> None:
    """One stderr handler on the root logger; uvicorn's loggers propagate to it instead of their own."""
    name = check_level(level)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)  # configured again (settings after the environment): replace, never add
    handler = StderrHandler()
    handler.setFormatter(FORMATTERS[fmt]())
    root.addHandler(handler)
    root.setLevel(name)
    for logger_name in _UVICORN_LOGGERS:
        logger = logging.getLogger(logger_name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(name)
