"""``docquery ask`` while a real ``docquery serve`` holds the index: it asks that service over HTTP with the
API key from --api-key-file, and the key's groups, not --as-groups, decide what the answer may use."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.core.exits import ExitCode
from docquery.runtime.preflight import lock_holder
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.ingest_fixtures import write
from tests.support.process_env import docquery_env, start_serve

pytestmark = pytest.mark.slow  # starts a service that loads the bundled model

KEYS = {"staff": "dq-test-staff-5f0c9a7e1b", "hr": "dq-test-hr-93ad04c6e2"}
QUESTION = "When do salary reviews happen?"


@dataclass
class Served:
    proc: subprocess.Popen[str]
    env: dict[str, str]
    tmp: Path
    record: Path


def _env(tmp: Path) -> dict[str, str]:
    return docquery_env(tmp)


def _corpus(tmp: Path) -> None:
    root = tmp / "corpus"
    write(root / "staff" / ACL_FILE, "groups: [staff]\n")
    write(root / "staff" / "parking.txt", "Parking. The staff garage opens at seven and salary questions go to HR.\n")
    write(root / "hr" / ACL_FILE, "groups: [hr]\n")
    write(root / "hr" / "reviews.txt", "Salary reviews. Salary reviews happen each March for every employee.\n")
    # The bundled model, as the service embeds questions with it: hash vectors would match nothing.
    settings = Settings(data_dir=tmp / "data", secrets_dir=tmp / "secrets", embedder={"tune_malloc": False})
    assert run_ingest(settings, IngestOptions(paths=(root,))).ok


def _keys(tmp: Path) -> None:
    secrets = tmp / "secrets"
    secrets.mkdir()
    entries = [
        {"id": group, "sha256": hashlib.sha256(key.encode()).hexdigest(), "groups": [group], "roles": ["query"]}
        for group, key in KEYS.items()
    ]
    (secrets / "api-keys.json").write_text(json.dumps(entries))
    for group, key in KEYS.items():
        (tmp / f"{group}.key").write_text(key + "\n")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ask-serve")
    _corpus(tmp)
    _keys(tmp)
    env = _env(tmp)
    proc, record = start_serve(tmp, env)
    assert lock_holder(tmp / "data" / "collections" / "docquery" / "wal") == proc.pid
    try:
        yield Served(proc, env, tmp, record)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def _ask(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docquery.cli", "ask", *args],
        env=served.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _sources(got: subprocess.CompletedProcess[str]) -> set[str]:
    assert got.returncode == ExitCode.OK, got.stderr
    return {c["source"] for c in json.loads(got.stdout)["citations"]}


def test_the_keys_groups_decide_what_the_answer_uses(served: Served) -> None:
    as_hr = _ask(served, QUESTION, "--api-key-file", str(served.tmp / "hr.key"), "--top-k", "10", "--json")
    assert _sources(as_hr) == {"corpus/hr/reviews.txt"}
    assert as_hr.stderr == ""  # the answer only: no model loading, no log line
    as_staff = _ask(served, QUESTION, "--api-key-file", str(served.tmp / "staff.key"), "--top-k", "10", "--json")
    assert _sources(as_staff) <= {"corpus/staff/parking.txt"}


def test_a_proxy_in_the_environment_never_sees_the_question(served: Served) -> None:
    env = served.env | {"HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9", "NO_PROXY": ""}
    got = subprocess.run(
        [sys.executable, "-m", "docquery.cli", "ask", QUESTION, "--api-key-file", str(served.tmp / "hr.key"), "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert _sources(got) == {"corpus/hr/reviews.txt"}  # port 9 answers nothing: it went to the service directly


def test_the_answer_is_printed_as_a_local_one_is(served: Served) -> None:
    got = _ask(served, QUESTION, "--api-key-file", str(served.tmp / "hr.key"))
    assert got.returncode == ExitCode.OK, got.stderr
    assert got.stdout.startswith("Answer (extractive, ") and "corpus/hr/reviews.txt" in got.stdout


def test_as_groups_is_refused_in_one_line(served: Served) -> None:
    got = _ask(served, QUESTION, "--api-key-file", str(served.tmp / "staff.key"), "--as-groups", "hr")
    assert got.returncode == ExitCode.USAGE and got.stdout == ""
    assert got.stderr.startswith("docquery: --as-groups does not apply when asking a running docquery serve")
    assert got.stderr.count("\n") == 1


def test_without_a_key_file_it_is_busy_and_says_how_to_ask(served: Served) -> None:
    got = _ask(served, QUESTION, "--as-groups", "hr")
    assert got.returncode == ExitCode.BUSY and got.stderr.count("\n") == 1
    url = json.loads(served.record.read_text())["url"]
    assert f"or ask it at {url}: add --api-key-file FILE" in got.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("dq-not-a-key-at-all", "refused the API key (401"),
        ("", "is empty: put the API key in it"),
        ("two words", "must hold one API key on one line"),
    ],
)
def test_a_bad_key_file_is_one_line_and_never_echoed(served: Served, content: str, expected: str) -> None:
    path = served.tmp / "bad.key"
    path.write_text(content)
    got = _ask(served, QUESTION, "--api-key-file", str(path))
    assert got.returncode == ExitCode.USAGE and got.stdout == "" and got.stderr.count("\n") == 1, got.stderr
    assert expected in got.stderr and (not content or content not in got.stderr)


def test_the_record_goes_with_the_service(tmp_path: Path) -> None:
    proc, record = start_serve(tmp_path, _env(tmp_path))
    assert json.loads(record.read_text())["pid"] == proc.pid
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert not record.exists()


def test_asking_the_service_imports_no_model_engine_or_web_framework(served: Served) -> None:
    got = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "docquery.cli", "ask", QUESTION,
         "--api-key-file", str(served.tmp / "hr.key"), "--json"],
        env=served.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert got.returncode == ExitCode.OK, got.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in got.stderr.splitlines() if line.startswith("import time:")}
    heavy = {"torch", "sentence_transformers", "qdrant_edge", "fastapi", "uvicorn", "starlette", "ingest", "aiohttp"}
    assert imported and not imported & heavy
