"""Audit log: one JSON line per request on the ``docquery.audit`` logger, hash-chained.

Each record carries who asked (principal id), when, the request id, the route,
the outcome and status, and the doc and chunk ids returned. Never question,
chunk or answer text.

Tamper evidence: records form a chain per process. Each record has ``chain``
(a random id chosen at start), ``seq`` (0, 1, 2...), ``prev`` (the previous
record's ``hash``; 64 zeros for seq 0) and ``hash``, the SHA-256 of the
record's canonical JSON (sorted keys, no spaces) without the ``hash`` field.
Editing, inserting, reordering or deleting a record inside a chain breaks
``verify_audit_log``; truncating the tail is not detectable from the log alone,
so ship the lines to an append-only store and compare the last ``seq``/``hash``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

AUDIT_LOGGER = "docquery.audit"
GENESIS = "0" * 64


def _digest(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


class AuditLog:
    """Writes chained audit records. Thread-safe; one chain per instance."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger or logging.getLogger(AUDIT_LOGGER)
        self._lock = threading.Lock()
        self.chain = uuid.uuid4().hex
        self._seq = 0
        self._prev = GENESIS

    def record(
        self,
        *,
        request_id: str,
        principal: str | None,
        method: str,
        route: str,
        status: int,
        outcome: str,
        doc_ids: Sequence[str] = (),
        chunk_ids: Sequence[str] = (),
        duration_ms: float | None = None,
        question_rewritten: bool = False,
        detail: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``detail``: ids, ACLs, states and reasons an upload adds (never document content)."""
        rec: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": request_id,
            "principal": principal,
            "method": method,
            "route": route,
            "status": status,
            "outcome": outcome,
            "doc_ids": list(doc_ids),
            "chunk_ids": list(chunk_ids),
        }
        if duration_ms is not None:
            rec["duration_ms"] = round(duration_ms, 3)
        if question_rewritten:
            rec["question_rewritten"] = True  # that the conversation changed the question, never its text
        if detail:
            rec["detail"] = dict(detail)
        with self._lock:
            rec["chain"] = self.chain
            rec["seq"] = self._seq
            rec["prev"] = self._prev
            rec["hash"] = _digest(rec)
            self._prev = rec["hash"]
            self._seq += 1
            # Logged inside the lock so the line order matches the chain order. ``extra``: the JSON
            # log format writes the record as an object (docquery/runtime/logs.py), not as an escaped string.
            self._log.info(_JsonLine(rec), extra={"audit": rec})
        return rec


class _JsonLine:
    """The record as one JSON line, encoded only when a formatter asks for the message text
    (the text format does; the JSON format writes ``audit`` itself)."""

    __slots__ = ("rec",)

    def __init__(self, rec: dict[str, Any]) -> None:
        self.rec = rec

    def __str__(self) -> str:
        return json.dumps(self.rec, separators=(",", ":"), ensure_ascii=True)


@dataclass
class AuditVerification:
    ok: bool
    records: int
    chains: dict[str, int] = field(default_factory=dict)  # chain id -> records seen
    errors: list[str] = field(default_factory=list)  # "line N: what is wrong"


def verify_audit_log(lines: Iterable[str]) -> AuditVerification:
    """Check every chain in ``lines`` (JSON records, possibly interleaved from several processes).

    Non-JSON lines are errors, blank lines are skipped. Each chain must start
    at seq 0 with the genesis ``prev`` (a chain starting later is reported:
    earlier records are missing, e.g. a rotated file, so verify rotated files
    together), and every later record must link to the one before it.
    """
    result = AuditVerification(ok=True, records=0)
    last: dict[str, tuple[int, str]] = {}
    for n, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            result.errors.append(f"line {n}: not JSON")
            continue
        if isinstance(rec, dict) and isinstance(rec.get("audit"), dict):
            rec = rec["audit"]  # a JSON log line (docquery/runtime/logs.py): the record is its "audit" object
        if not isinstance(rec, dict) or not {"chain", "seq", "prev", "hash"} <= rec.keys():
            result.errors.append(f"line {n}: not an audit record")
            continue
        result.records += 1
        chain, seq, prev, claimed = str(rec["chain"]), rec["seq"], rec["prev"], rec["hash"]
        result.chains[chain] = result.chains.get(chain, 0) + 1
        if _digest(rec) != claimed:
            result.errors.append(f"line {n}: hash mismatch (record altered)")
        if chain in last:
            last_seq, last_hash = last[chain]
            if seq != last_seq + 1:
                result.errors.append(f"line {n}: seq {seq} follows {last_seq} (record missing or reordered)")
            if prev != last_hash:
                result.errors.append(f"line {n}: prev does not match the previous record's hash")
        elif seq == 0 and prev != GENESIS:
            result.errors.append(f"line {n}: first record of chain does not start at genesis")
        elif seq != 0:
            result.errors.append(f"line {n}: chain {chain} starts at seq {seq}, not 0 (earlier records missing)")
        last[chain] = (seq if isinstance(seq, int) else -2, str(claimed))
    result.ok = not result.errors
    return result


def is_audit_line(line: str) -> bool:
    """A service log holds every logger's lines: keep the audit logger's (JSON or text format).

    Skipping the others hides nothing: a removed or altered audit line breaks its chain.
    """
    stripped = line.strip()
    if not stripped:
        return False
    if stripped.startswith("{"):
        try:
            rec = json.loads(stripped)
        except ValueError:
            return True  # broken JSON is reported, never skipped
        return not (isinstance(rec, dict) and "logger" in rec and rec["logger"] != AUDIT_LOGGER)
    return AUDIT_LOGGER in stripped


def json_part(line: str) -> str:
    """Strip a log formatter's prefix: the record is the text from the first ``{``."""
    i = line.find("{")
    return line[i:] if i >= 0 else line
