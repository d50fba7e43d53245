"""Audit records (one hash-chained JSON line per request) and Prometheus metrics on their own port."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import httpx
import pytest

from docquery.api.audit import AUDIT_LOGGER, AuditLog, verify_audit_log
from docquery.api.metrics import Metrics, start_metrics_server
from docquery.cli import main as cli_main
from tests.support.api_harness import Harness, bearer
from tests.support.fixtures import VACATION, harness_fixture

AUTH = bearer("tok-alice-eng")


h = harness_fixture(VACATION, ("pay", "Salaries are paid monthly.", "hr"))


def audit_main(argv: list[str]) -> int:
    return cli_main(["audit", "verify", *argv])


def _audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]


def test_one_chained_record_per_request(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    r1 = h.client.post("/v1/query", json={"question": "vacation days paid leave"}, headers=AUTH)
    h.client.post("/v1/query", json={"question": "vacation"}, headers=bearer("bad"))
    h.client.post("/v1/query", json={"question": "vacation days", "stream": True}, headers=AUTH)
    h.client.get("/v1/documents", headers=AUTH)
    h.client.get("/healthz")  # probes are not audited
    lines = _audit_lines(caplog)
    assert len(lines) == 4
    records = [json.loads(line) for line in lines]
    first = records[0]
    assert first["request_id"] == r1.headers["x-request-id"]
    assert first["principal"] == "key:alice" and first["route"] == "/v1/query"
    assert first["status"] == 200 and first["outcome"] == "answered"
    assert first["doc_ids"] == ["vac"] and len(first["chunk_ids"]) == 1
    assert set(first) >= {"time", "request_id", "principal", "route", "outcome", "doc_ids", "chunk_ids", "hash"}
    assert records[1]["status"] == 401 and records[1]["principal"] is None and records[1]["doc_ids"] == []
    assert records[2]["doc_ids"] == ["vac"]  # the stream's record is written after the stream ends
    assert records[3]["doc_ids"] == ["vac"]  # the listing: only what alice may see
    for prev, rec in itertools.pairwise(records):
        assert rec["prev"] == prev["hash"] and rec["seq"] == prev["seq"] + 1
    assert verify_audit_log(lines).ok


def test_tampering_is_detected(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    audit = AuditLog()
    for i in range(5):
        audit.record(
            request_id=f"r{i}",
            principal="key:a",
            method="POST",
            route="/v1/query",
            status=200,
            outcome="answered",
            doc_ids=[f"d{i}"],
            chunk_ids=[f"c{i}"],
        )
    lines = _audit_lines(caplog)
    assert verify_audit_log(lines).ok and verify_audit_log(lines).records == 5

    edited = json.loads(lines[2])
    edited["doc_ids"] = []  # hide what was returned
    assert not verify_audit_log([*lines[:2], json.dumps(edited), *lines[3:]]).ok
    assert not verify_audit_log([*lines[:2], *lines[3:]]).ok  # a deleted record
    assert not verify_audit_log([lines[0], lines[2], lines[1], *lines[3:]]).ok  # reordered
    assert not verify_audit_log(lines[1:]).ok  # the head of the chain is missing
    # Re-hashing an edited record does not help: the next record's prev no longer matches.
    from docquery.api.audit import _digest

    edited["hash"] = _digest(edited)
    result = verify_audit_log([*lines[:2], json.dumps(edited), *lines[3:]])
    assert not result.ok and any("prev" in e for e in result.errors)


def test_verify_cli_on_a_log_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    a, b = AuditLog(), AuditLog()  # two processes: two chains, interleaved in one file
    for i in range(3):
        a.record(request_id=f"a{i}", principal="p", method="GET", route="/v1/models", status=200, outcome="ok")
        b.record(request_id=f"b{i}", principal="p", method="GET", route="/v1/models", status=200, outcome="ok")
    path = tmp_path / "audit.log"
    path.write_text("".join(f"2026-11-29 12:00:00 INFO docquery.audit {line}\n" for line in _audit_lines(caplog)))
    assert audit_main([str(path)]) == 0
    path.write_text(path.read_text().replace('"status":200', '"status":201', 1))
    assert audit_main([str(path)]) == 1


def test_metrics_are_recorded(h: Harness) -> None:
    h.client.post("/v1/query", json={"question": "vacation days paid leave"}, headers=AUTH)
    h.client.post("/v1/query", json={"question": "vacation"}, headers=bearer("tok-nogroups"))  # refused
    h.client.post("/v1/query", json={"question": "x"}, headers=bearer("tok-norole"))
    text = h.app.state.metrics.render().decode()
    assert 'docquery_http_requests_total{method="POST",route="/v1/query",status="2xx"}' in text
    assert 'docquery_http_request_duration_seconds_bucket{le="0.005",route="/v1/query"}' in text
    assert 'docquery_retrieval_seconds_count{stage="embed"}' in text
    assert 'docquery_retrieval_seconds_count{stage="search"}' in text
    assert "docquery_llm_time_to_first_token_seconds_count" in text
    assert "docquery_llm_duration_seconds_count" in text
    assert "docquery_llm_completion_tokens_total" in text
    assert _value(text, "docquery_refusals_total") >= 1
    assert _value(text, 'docquery_auth_failures_total{status="403"}') >= 1
    assert "docquery_rate_limited_total" in text and "docquery_overloaded_total" in text


def _value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not found")


def test_metrics_served_on_their_own_port_only(h: Harness) -> None:
    assert h.client.get("/metrics").status_code == 404  # not on the API port
    httpd, thread = start_metrics_server(h.app.state.metrics, "127.0.0.1", 0)
    try:
        port = httpd.server_address[1]
        r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert r.status_code == 200 and "docquery_http_requests_total" in r.text
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_registries_are_per_app() -> None:
    a, b = Metrics(), Metrics()  # no "Duplicated timeseries" from a shared global registry
    a.observe_request("/v1/query", "POST", 200, 0.01)
    assert b"docquery_http_requests_total{" not in b.render()
