"""Crash safety of uploads: kill -9 a real service mid-ingest, start it again.

The service is the real ``docquery serve`` on the embedded engine, and the same app on a Qdrant server's API
(qdrant-client's on-disk local mode, ``path=``: a program in tests/support, since ``serve`` takes a server by
URL). Both run the real bundled model, with one chunk per embed call so that a document of a few hundred
chunks is slow enough to be killed while its chunks are written. Concurrent writers to a real Qdrant server
(the CLI, the Job and the API at once) are not tested here: no server binary runs in this environment.

Checked: the document being written is ``embedding`` when killed, and its previous version is still whole
(every chunk of it there and searchable: no half-indexed document is visible); after the restart it is
``interrupted`` and queued again, then indexed with only its new chunks; the document queued behind it is
indexed; a document indexed before the upload is untouched.
"""

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
from typing import Any

import httpx
import pytest

from docquery.config.settings import Settings
from docquery.core.collection import chunk_point_id
from docquery.wiring import build_embedder, build_index
from tests.support.process_env import docquery_env
from tests.support.serve_local_qdrant import open_local

pytestmark = pytest.mark.slow
KEY = "upload-kill-key"
SENTENCE = "Section {n} of the travel handbook says that trains are booked {n} days ahead by the travel desk. "


@dataclass
class Service:
    proc: subprocess.Popen[str]
    url: str


def _env(tmp: Path) -> dict[str, str]:
    return docquery_env(
        tmp,
        DOCQUERY_UPLOADS__EMBED_BATCH="1",  # slow on purpose: one chunk per model call
        DOCQUERY_INGEST__OPTIMIZE="false",
        DOCQUERY_API__RATE_LIMIT_PER_MINUTE="100000",  # the test polls statuses
        DOCQUERY_API__RATE_LIMIT_BURST="100000",
        DOCQUERY_LOG_FORMAT="json",
    )


def _keys(tmp: Path) -> None:
    secrets = tmp / "secrets"
    secrets.mkdir()
    entry = {
        "id": "up",
        "sha256": hashlib.sha256(KEY.encode()).hexdigest(),
        "groups": ["eng"],
        "roles": ["ingest", "query"],
    }
    (secrets / "api-keys.json").write_text(json.dumps([entry]))


def _start(argv: list[str], env: dict[str, str], address_file: Path) -> Service:
    address_file.unlink(missing_ok=True)
    # Its log goes to a file: a pipe nobody reads fills with the audit lines of the status polls, and then
    # the service blocks writing one.
    log = Path(env["DOCQUERY_DATA_DIR"]).parent / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=sink, text=True)
    deadline = time.monotonic() + 300
    while not address_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert address_file.exists(), f"the service did not start: {log.read_text()[-2000:]}"
    url = json.loads(address_file.read_text())["url"]
    return Service(proc, url)


def _call(service: Service, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}"}
    return httpx.request(method, service.url + path, headers=headers, timeout=60, **kw)


def _wait(service: Service, doc_id: str, states: set[str], timeout_s: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        body: dict[str, Any] = _call(service, "GET", f"/v1/documents/{doc_id}").json()
        if body.get("status") in states:
            return body
        assert time.monotonic() < deadline, f"{doc_id} stayed {body.get('status')}"
        time.sleep(0.1)


def _upload(service: Service, files: list[tuple[str, bytes]]) -> dict[str, str]:
    parts = [("files", (name, data, "text/plain")) for name, data in files]
    r = _call(service, "POST", "/v1/documents", files=parts, data={"groups": "eng"})
    assert r.status_code == 202, r.text
    return {d["name"]: d["doc_id"] for d in r.json()["documents"]}


def _search_ids(service: Service, query: str) -> set[str]:
    r = _call(service, "POST", "/v1/search", json={"query": query, "top_k": 50})
    assert r.status_code == 200, r.text
    return {c["doc_id"] for c in r.json()["citations"]}


def _engines() -> list[str]:
    return ["embedded", "server-path"]


Launcher = tuple[list[str], dict[str, str], Path, str, Path]


@pytest.fixture(params=_engines())
def launcher(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Launcher]:
    _keys(tmp_path)
    env = _env(tmp_path)
    if request.param == "embedded":
        argv = [sys.executable, "-m", "docquery.cli", "serve", "--port", "0"]
        address = tmp_path / "data" / "serve" / "docquery.json"
    else:
        address = tmp_path / "address.json"
        argv = [sys.executable, "-m", "tests.support.serve_local_qdrant", str(tmp_path / "qdrant"), str(address)]
    yield argv, env, address, request.param, tmp_path


def _chunks_of(service: Service, doc_id: str) -> int:
    return int(_call(service, "GET", f"/v1/documents/{doc_id}").json()["chunk_count"])


def _index_state(tmp: Path, engine: str, doc_id: str) -> tuple[str, set[str]]:
    """The document's record state and chunk ids, read from the index while no service holds it."""
    settings = Settings(data_dir=tmp / "data", secrets_dir=tmp / "secrets")
    if engine == "embedded":
        index = build_index(settings, build_embedder(settings, lazy=True))
        client = None
    else:
        index, client = open_local(tmp / "qdrant", settings)
    try:
        record = index.get_document(doc_id)
        return (record.status if record else "missing"), set(index.chunk_ids(doc_id))
    finally:
        index.close()
        if client is not None:
            client.close()


def _ids(doc_id: str, text: bytes, count: int) -> set[str]:
    sha = hashlib.sha256(text).hexdigest()
    return {chunk_point_id(doc_id, sha, i) for i in range(count)}


def test_kill_9_mid_ingest_then_restart(launcher: Launcher) -> None:
    argv, env, address, engine, tmp = launcher
    service = _start(argv, env, address)
    try:
        before = _upload(service, [("canteen.txt", b"The canteen opens at noon and closes at three.\n")])
        _wait(service, before["canteen.txt"], {"indexed"})
        v1 = "".join(SENTENCE.format(n=n) for n in range(40)).encode()
        handbook = _upload(service, [("handbook.txt", v1)])["handbook.txt"]
        _wait(service, handbook, {"indexed"})
        v1_count = _chunks_of(service, handbook)
        assert v1_count >= 3 and _search_ids(service, "travel handbook trains booked days ahead")

        v2 = "".join(SENTENCE.format(n=n) + "Revised. " for n in range(400)).encode()
        second = _upload(service, [("handbook.txt", v2), ("later.txt", b"Queued behind: the library lends laptops.\n")])
        _wait(service, handbook, {"embedding"})
        time.sleep(1.0)  # some of the new version's chunks are written
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(timeout=30)
    finally:
        if service.proc.poll() is None:
            service.proc.kill()
            service.proc.wait()

    # Killed mid-write: the record says embedding, and the old version is whole beside the new chunks so far.
    status, ids = _index_state(tmp, engine, handbook)
    v1_ids, v2_ids = _ids(handbook, v1, v1_count), ids - _ids(handbook, v1, v1_count)
    assert status == "embedding" and v1_ids <= ids and v2_ids, (status, len(ids), v1_count)

    service = _start(argv, env, address)
    try:
        # No half-indexed document: the old version is whole, or the new one complete.
        status = _wait(service, handbook, {"interrupted", "parsing", "embedding", "indexed"})
        assert status["status"] in ("interrupted", "parsing", "embedding", "indexed")
        final = _wait(service, handbook, {"indexed"})
        later = _wait(service, second["later.txt"], {"indexed"})
        assert final["chunk_count"] > v1_count and later["status"] == "indexed"
        # Nothing indexed before is lost; the old version's chunks are gone now the new one is complete.
        assert _wait(service, before["canteen.txt"], {"indexed"})["status"] == "indexed"
        assert _call(service, "POST", "/v1/search", json={"query": "canteen noon"}).json()["citations"]
    finally:
        service.proc.send_signal(signal.SIGTERM)
        service.proc.wait(timeout=60)
    status, ids = _index_state(tmp, engine, handbook)
    assert status == "indexed" and ids == _ids(handbook, v2, final["chunk_count"])  # only the new version
