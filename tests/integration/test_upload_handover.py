"""The CLI's hand-over when a ``docquery serve`` holds the data dir: ``docquery ingest PATH`` says so in one line
and how to send the files; ``--server URL --api-key-file F`` sends them (discovery and ACL files read here),
with the key's role and grants checked by the service; the documents keep their corpus ids, so a direct run
after the service stops finds them unchanged."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ingest.discover.acl import ACL_FILE
from tests.support.ingest_fixtures import write
from tests.support.process_env import docquery_env, start_serve

pytestmark = pytest.mark.slow
KEYS = {
    "ingester": ("key-ingester", ["eng"], ["ingest", "query"]),
    "reader": ("key-reader", ["eng"], ["query"]),
}


@dataclass
class Served:
    proc: subprocess.Popen[str]
    env: dict[str, str]
    tmp: Path
    url: str


def _env(tmp: Path) -> dict[str, str]:
    return docquery_env(tmp, DOCQUERY_API__RATE_LIMIT_PER_MINUTE="100000", DOCQUERY_API__RATE_LIMIT_BURST="100000")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("handover")
    (tmp / "secrets").mkdir()
    entries = []
    for name, (key, groups, roles) in KEYS.items():
        entries.append(
            {"id": name, "sha256": hashlib.sha256(key.encode()).hexdigest(), "groups": groups, "roles": roles}
        )
        (tmp / f"{name}.key").write_text(key + "\n")
    (tmp / "secrets" / "api-keys.json").write_text(json.dumps(entries))
    corpus = tmp / "corpus"
    write(corpus / ACL_FILE, "groups: [eng]\n")
    write(corpus / "travel.md", "# Travel\n\nTrains are booked two weeks ahead by the travel desk.\n")
    write(corpus / "sub" / "canteen.txt", "The canteen opens at noon.\n")
    write(corpus / "board" / ACL_FILE, "groups: [board]\n")
    write(corpus / "board" / "minutes.txt", "Board minutes: the budget is approved.\n")
    env = _env(tmp)
    proc, record = start_serve(tmp, env)
    try:
        yield Served(proc, env, tmp, json.loads(record.read_text())["url"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def _ingest(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docquery.cli", "ingest", str(served.tmp / "corpus"), *args],
        env=served.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_direct_run_says_in_one_line_how_to_send_the_files(served: Served) -> None:
    got = _ingest(served)
    assert got.returncode == 3
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and served.url in lines[0]
    assert f"--server {served.url} --api-key-file FILE" in lines[0] and "ingest role" in lines[0]


def test_the_hand_over_sends_with_the_keys_rights_and_keeps_corpus_ids(served: Served) -> None:
    reader = _ingest(served, "--server", served.url, "--api-key-file", str(served.tmp / "reader.key"))
    assert reader.returncode == 1 and "403" in reader.stdout and "sent 0 files" in reader.stdout

    got = _ingest(served, "--server", served.url, "--api-key-file", str(served.tmp / "ingester.key"))
    # The board folder's ACL names a group the key may not grant: those files are refused, the rest sent.
    assert got.returncode == 1, got.stdout + got.stderr
    assert "sent 2 files" in got.stdout
    refused = [line for line in got.stdout.splitlines() if line.startswith("failed ")]
    assert len(refused) == 1 and "minutes.txt" in refused[0] and "groups" in refused[0]
    jobs = [line.split()[1] for line in got.stdout.splitlines() if line.startswith("job ")]
    auth = {"Authorization": "Bearer key-ingester"}
    deadline = time.monotonic() + 300
    while True:
        states = [httpx.get(f"{served.url}/v1/ingest/jobs/{job}", headers=auth, timeout=30).json() for job in jobs]
        if all(s.get("done") for s in states):
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.2)
    docs = [d for s in states for d in s["documents"]]
    assert sorted(d["status"] for d in docs) == ["indexed", "indexed"]
    listed = httpx.get(f"{served.url}/v1/documents", headers=auth, timeout=30).json()["documents"]
    assert {d["source"] for d in listed} == {"corpus/travel.md", "corpus/sub/canteen.txt"}

    # Once the service stops, a direct run finds the documents it was sent unchanged (the same corpus ids).
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=60)
    direct = _ingest(served, "--json")
    report = json.loads(direct.stdout)
    assert report["unchanged"] == 2 and report["added"] == 1, report  # the board's file, refused before


def test_bad_hand_over_flags_are_one_line(served: Served, tmp_path: Path) -> None:
    alone = _ingest(served, "--server", "http://127.0.0.1:9")
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) == 1
    assert "--api-key-file" in alone.stderr
    dry = _ingest(served, "--server", served.url, "--api-key-file", str(served.tmp / "reader.key"), "--dry-run")
    assert dry.returncode == 2 and "--dry-run" in dry.stderr
