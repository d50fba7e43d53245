"""``docquery serve`` fails to start in one line with the documented exit code, and a SIGTERM stops it with 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(DOCQUERY_DATA_DIR=str(tmp_path / "data"), DOCQUERY_SECRETS_DIR=str(tmp_path / "secrets"))
    # No metrics server unless a case asks for one: a `docquery serve` on this machine may hold 9464.
    env.update(HF_HUB_OFFLINE="1", DOCQUERY_LOG_FORMAT="json", DOCQUERY_METRICS_PORT="0")
    env.update(env_extra)
    cmd = [sys.executable, "-m", "docquery.cli", "serve", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)


def _a_file(tmp_path: Path) -> str:
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    return str(path)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("data dir is a file", "is a file, not a folder: set DOCQUERY_DATA_DIR to a folder"),
        ("no Qdrant server at the URL", "no response from the Qdrant server at http://127.0.0.1:"),
        ("port out of range", "argument --port: 70000 is not a port: use 1 to 65535 (or 0, any free one)"),
        ("port not a number", "argument --port: not a port number: 'http'"),
        ("metrics port is the API port", "DOCQUERY_METRICS_PORT ("),
        # The query side never creates the collection (in the bundle its Qdrant key may only read).
        ("no collection on the Qdrant server yet", "does not exist on the Qdrant server yet: run the ingest first"),
    ],
)
def test_a_start_that_cannot_succeed_is_one_line_and_its_exit_code(tmp_path: Path, case: str, expected: str) -> None:
    port = str(_free_port())
    args, env = ["--port", port], {}
    if case == "data dir is a file":
        env["DOCQUERY_DATA_DIR"] = _a_file(tmp_path)
    elif case == "no Qdrant server at the URL":
        env["DOCQUERY_QDRANT__URL"] = f"http://127.0.0.1:{_free_port()}"
    elif case == "no collection on the Qdrant server yet":
        env["DOCQUERY_QDRANT__URL"] = ":memory:"  # qdrant-client's local mode: the server's API, no server
    elif case == "port out of range":
        args = ["--port", "70000"]
    elif case == "port not a number":
        args = ["--port", "http"]
    else:
        env["DOCQUERY_METRICS_PORT"] = port
    done = _serve(tmp_path, *args, **env)
    # 75 (retry later): a server that does not answer may be restarting; everything else is the setup's.
    assert done.returncode == (75 if case == "no Qdrant server at the URL" else 2), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "startup failed" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert expected in errors[-1], done.stderr[-2000:]


@pytest.mark.slow
def test_serving_a_data_dir_with_nothing_in_it_warns_and_a_sigterm_is_a_normal_stop(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    typo = tmp_path / "dta"  # the data dir a user meant to type differently
    env.update(DOCQUERY_DATA_DIR=str(typo), DOCQUERY_SECRETS_DIR=str(tmp_path / "secrets"), HF_HUB_OFFLINE="1")
    env.update(DOCQUERY_LOG_FORMAT="json", DOCQUERY_METRICS_PORT="0")
    cmd = [sys.executable, "-m", "docquery.cli", "serve", "--port", str(_free_port())]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "Application startup complete" in line:
                break
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=30)
    finally:
        proc.kill()
    records = [json.loads(line) for line in lines]
    warnings = [r["message"] for r in records if r["level"] == "WARNING" and "collection" in r["message"]]
    assert len(warnings) == 1 and "did not exist and was created empty" in warnings[0]
    assert f"DOCQUERY_DATA_DIR={typo}" in warnings[0]
    assert status == 0


def test_ask_on_a_server_without_the_collection_says_the_index_is_empty(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(DOCQUERY_QDRANT__URL=":memory:", DOCQUERY_DATA_DIR=str(tmp_path), HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "docquery.cli", "ask", "How many days?", "--as-groups", "staff"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 4, done.stderr[-2000:]
    assert "collection 'docquery' in the Qdrant server does not exist" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize("command", [["ingest", "--groups", "staff", "."], ["ask", "How many days?"]])
def test_a_qdrant_server_that_does_not_answer_is_exit_75_for_every_command(tmp_path: Path, command: list[str]) -> None:
    # 75, not 2: the ingest Job fails an index for good on 2, and retries anything else.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(DOCQUERY_QDRANT__URL=f"http://127.0.0.1:{_free_port()}", DOCQUERY_DATA_DIR=str(tmp_path))
    env.update(HF_HUB_OFFLINE="1")
    (tmp_path / "a.txt").write_text("The canteen opens at noon.")
    cmd = [sys.executable, "-m", "docquery.cli", *command]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 75, done.stderr[-2000:]
    assert "no response from the Qdrant server" in done.stderr.splitlines()[-1]


@pytest.mark.slow
def test_serve_on_port_0_logs_the_address_it_listens_on(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(DOCQUERY_DATA_DIR=str(tmp_path / "data"), DOCQUERY_SECRETS_DIR=str(tmp_path / "secrets"))
    metrics_port = _free_port()
    env.update(HF_HUB_OFFLINE="1", DOCQUERY_LOG_FORMAT="json", DOCQUERY_METRICS_PORT=str(metrics_port))
    cmd = [sys.executable, "-m", "docquery.cli", "serve", "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    listening: list[str] = []
    watchdog = threading.Timer(120, proc.kill)  # a serve that never says it ends the loop below, not the run
    watchdog.start()
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            record = json.loads(line)
            if record["message"].startswith("listening on "):
                listening.append(record["message"])
                assert record["level"] == "INFO"
                break
        assert listening, "serve never said where it listens"
        port = int(listening[0].removeprefix("listening on http://127.0.0.1:").split(";")[0])
        assert port != 0 and listening[0].endswith(f"; metrics on port {metrics_port}")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:  # it accepts there now
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert conn.recv(64).startswith(b"HTTP/1.1 200")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        watchdog.cancel()
        proc.kill()
