"""``docquery serve`` logs one JSON object per line, every logger (uvicorn's too); audit records are
objects that ``docquery audit verify`` verifies in the service's own log as written."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from docquery.config.settings import Settings
from docquery.wiring import build_index
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.ingest_fixtures import ModelStandIn, scifact_docs, write

pytestmark = pytest.mark.slow
TOKEN = "dq_test-token-for-the-log-test"
CANARY = "zqxcanary7741"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(port: int, path: str, body: dict[str, Any] | None = None, token: str = TOKEN) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    url = f"http://127.0.0.1:{port}{path}"
    resp = (
        httpx.post(url, json=body, headers=headers, timeout=60)
        if body is not None
        else httpx.get(url, headers=headers, timeout=60)
    )
    return resp.status_code


def _serve_log(tmp_path: Path, **env_extra: str) -> tuple[list[str], Path]:
    root, data, secrets = tmp_path / "corpus", tmp_path / "data", tmp_path / "secrets"
    write(root / ACL_FILE, "groups: [staff]\n")
    for doc_id, text in scifact_docs(4):
        write(root / f"doc-{doc_id}.txt", text)
    settings = Settings(data_dir=data, secrets_dir=secrets)
    stand_in = ModelStandIn()
    index = build_index(settings, stand_in)
    try:
        assert run_ingest(settings, IngestOptions(paths=(root,)), embedder=stand_in, index=index).ok
    finally:
        index.close()
    secrets.mkdir()
    key = {"id": "me", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "groups": ["staff"], "roles": ["query"]}
    (secrets / "api-keys.json").write_text(json.dumps([key]))

    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(
        DOCQUERY_DATA_DIR=str(data), DOCQUERY_SECRETS_DIR=str(secrets), DOCQUERY_METRICS_PORT="0",
        HF_HUB_OFFLINE="1", **env_extra,
    )  # fmt: skip
    port, log_path = _free_port(), tmp_path / "service.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "docquery.cli", "serve", "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if _request(port, "/healthz") == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.3)
            assert _request(port, "/v1/query", {"question": f"What does {CANARY} say?"}) == 200
            assert _request(port, "/v1/documents") == 200
            assert _request(port, "/v1/query", {"question": CANARY}, token="wrong") == 401
        finally:
            proc.terminate()
            status = proc.wait(timeout=30)
    assert status == 0, "a SIGTERM (how `kill` and Kubernetes stop a service) is a normal stop"
    return log_path.read_text().splitlines(), log_path


def test_serve_logs_json_lines_and_audit_records_verify(tmp_path: Path) -> None:
    lines, log_path = _serve_log(tmp_path, DOCQUERY_LOG_LEVEL="DEBUG")
    records = [json.loads(line) for line in lines if line.strip()]  # every line is one JSON object
    assert records
    for rec in records:
        assert {"timestamp", "level", "logger", "message"} <= rec.keys(), rec
    loggers = {rec["logger"] for rec in records}
    assert {"uvicorn.error", "docquery.audit", "docquery.api.access"} <= loggers, loggers

    audits = [rec for rec in records if rec["logger"] == "docquery.audit"]
    assert len(audits) == 3 and all(isinstance(rec["audit"], dict) for rec in audits)
    assert [a["audit"]["status"] for a in audits] == [200, 200, 401]
    for rec in audits:
        assert rec["request_id"] == rec["audit"]["request_id"]
    access = [r for r in records if r["logger"] == "docquery.api.access" and "/healthz" not in r["message"]]
    assert len(access) == 3 and all(rec["level"] == "DEBUG" and rec.get("request_id") for rec in access)

    assert CANARY not in "\n".join(lines)  # the question is never logged, at DEBUG either

    verified = subprocess.run(
        [sys.executable, "-m", "docquery.cli", "audit", "verify", str(log_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["records"] == 3


def test_text_format_and_info_level_on_request(tmp_path: Path) -> None:
    lines, log_path = _serve_log(tmp_path, DOCQUERY_LOG_FORMAT="text")
    assert lines and not any(line.startswith("{") for line in lines)
    assert not any("docquery.api.access" in line for line in lines)  # DEBUG only
    audit_lines = [line for line in lines if " docquery.audit " in line]
    assert len(audit_lines) == 3
    verified = subprocess.run([sys.executable, "-m", "docquery.cli", "audit", "verify", str(log_path)], check=False)
    assert verified.returncode == 0
