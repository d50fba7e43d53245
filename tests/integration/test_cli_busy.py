"""What another process holds, or Ctrl-C, is one clear line and a documented exit code, never a traceback.

Real processes on loopback and temp dirs: a real ``docquery serve`` holds the
embedded index while ``ingest``, ``ask`` and a second ``serve`` start; ports are
held by plain sockets; Ctrl-C is SIGINT to the ingest's process group, as a
terminal sends it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.core.exits import ExitCode
from docquery.runtime.preflight import lock_holder
from docquery.wiring import build_index
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.fakes import HashEmbedder
from tests.support.ingest_fixtures import ModelStandIn, scifact_docs, write
from tests.support.process_env import docquery_env

_EXIT_INTERRUPTED = 130


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return docquery_env(tmp, secrets="no-secrets", **extra)


def _docquery(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docquery.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_clear_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("docquery")]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    """A small collection made with the bundled model's id and dimension (hash vectors)."""
    root = tmp_path / "corpus"
    write(root / ACL_FILE, "groups: [staff]\n")
    for doc_id, text in scifact_docs(5):
        write(root / f"doc-{doc_id}.txt", text)
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "no-secrets")
    stand_in = ModelStandIn()
    index = build_index(settings, stand_in)
    try:
        assert run_ingest(settings, IngestOptions(paths=(root,)), embedder=stand_in, index=index).ok
    finally:
        index.close()
    return root


def test_lock_holder_names_the_process_that_holds_the_shard(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "no-secrets")
    index = build_index(settings, HashEmbedder())
    wal = tmp_path / "data" / "collections" / settings.qdrant.collection / "wal"
    try:
        assert lock_holder(wal) == os.getpid()  # flock conflicts across open files, even in one process
    finally:
        index.close()
    assert lock_holder(wal) is None
    assert lock_holder(tmp_path / "nothing-here") is None


@pytest.fixture
def served(tmp_path: Path, indexed: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    env = _env(tmp_path, DOCQUERY_METRICS_PORT="0")
    # The service's log goes to a file: a pipe nobody reads fills with its audit lines, and it then blocks.
    with (tmp_path / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "docquery.cli", "serve", "--port", str(_free_port())],
            env=env, stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
    wal = tmp_path / "data" / "collections" / "docquery" / "wal"
    deadline = time.monotonic() + 120
    while lock_holder(wal) is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lock_holder(wal) == proc.pid, "serve did not open the index"
    try:
        yield proc, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_commands_while_serve_holds_the_index(
    served: tuple[subprocess.Popen[str], dict[str, str]], indexed: Path
) -> None:
    proc, env = served
    for args in (
        ("ingest", str(indexed)),
        ("ask", "What is in the corpus?", "--as-groups", "staff"),
        ("serve", "--port", str(_free_port())),
    ):
        started = time.monotonic()
        got = _docquery(*args, env=env)
        assert got.returncode == ExitCode.BUSY, (args, got.stderr)
        _one_clear_line(got, f"process {proc.pid}", "docquery serve", "DOCQUERY_QDRANT__URL")
        # Checked before the model loads: no model line, and quickly.
        assert "SentenceTransformer" not in got.stderr
        assert time.monotonic() - started < 30


@pytest.mark.parametrize("which", ["api", "metrics"])
def test_serve_on_a_busy_port(tmp_path: Path, which: str) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    busy = holder.getsockname()[1]
    try:
        if which == "api":
            got = _docquery("serve", "--port", str(busy), env=_env(tmp_path, DOCQUERY_METRICS_PORT="0"))
            _one_clear_line(got, f"API port 127.0.0.1:{busy} is in use", "--port")
        else:
            env = _env(tmp_path, DOCQUERY_METRICS_PORT=str(busy))
            got = _docquery("serve", "--port", str(_free_port()), env=env)
            _one_clear_line(got, f"metrics port 127.0.0.1:{busy} is in use", "DOCQUERY_METRICS_PORT")
    finally:
        holder.close()
    assert got.returncode == ExitCode.BUSY
    assert "OSError" not in got.stderr
    # Both ports are checked before the model loads and before the index is opened (or created).
    assert "SentenceTransformer" not in got.stderr
    assert not (tmp_path / "data").exists()


_WRITTEN = re.compile(r"chunks written (\d+)")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ctrl_c_during_ingest(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    write(root / ACL_FILE, "groups: [research]\n")
    docs = scifact_docs(120)
    for doc_id, text in docs:
        write(root / f"doc-{doc_id}.txt", text)
    env = _env(tmp_path, DOCQUERY_INGEST__PROGRESS_INTERVAL_S="0", DOCQUERY_INGEST__EMBED_BATCH="16")
    proc = subprocess.Popen(
        [sys.executable, "-m", "docquery.cli", "ingest", str(root)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    watchdog = threading.Timer(600, proc.kill)
    watchdog.start()
    stderr: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            stderr.append(line)
            m = _WRITTEN.search(line)
            if m and int(m.group(1)) > 0:
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does
                break
        # The embed call in flight finishes first (seconds; minutes on a loaded 2-core machine).
        out, rest = proc.communicate(timeout=400)
        stderr.append(rest)
    finally:
        watchdog.cancel()
        proc.kill()
    text = "".join(stderr)
    assert proc.returncode == _EXIT_INTERRUPTED, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert text.count("interrupted") == 1 and "run the same command again to continue" in text
    assert text.index("docquery ingest: stopping once the batch") < text.index("docquery ingest: interrupted")
    assert out == ""  # no report of a run that did not finish
    # stderr is not a terminal: every log line is one JSON object; the outcome is the one plain line.
    for line in text.splitlines():
        if line.strip() and not line.startswith(("docquery ingest: interrupted", "docquery ingest: stopping")):
            assert isinstance(json.loads(line), dict), line

    # Nothing indexed is lost, and the re-run continues: what was written is unchanged now.
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "no-secrets")
    stand_in = ModelStandIn()
    index = build_index(settings, stand_in)
    try:
        report = run_ingest(settings, IngestOptions(paths=(root,)), embedder=stand_in, index=index)
    finally:
        index.close()
    assert report.ok
    assert report.unchanged > 0, "the interrupted run kept nothing"
    assert report.unchanged + report.added + report.updated == len(docs)
    assert report.added + report.updated > 0, "the run finished before the interrupt (the test proves nothing)"
