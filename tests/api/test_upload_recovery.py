"""Restart survival, in process: a service stopped with uploads queued or in progress leaves their state in the
index, and the next start takes them up again from the spool (or fails them, with the reason, when their spool
file is gone). The real kill -9 of a real ``docquery serve`` is tests/integration/test_upload_kill.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from docquery.api.audit import AUDIT_LOGGER
from docquery.api.uploads.worker import GONE
from docquery.core.uploads import UploadOutcome, UploadTask
from docquery.index import open_edge
from tests.support.api_harness import Harness, JwtIssuer, make_harness
from tests.support.fakes import HashEmbedder
from tests.support.uploads import UPLOAD_KEYS, auth, drain, spooled, upload, write_upload_keys


class _Stalled:
    """Holds every document until the service stops, then reports it interrupted (a stop mid-document)."""

    def __init__(self) -> None:
        self.started = threading.Event()

    def ready(self) -> bool:
        return True

    def process(self, tasks: Sequence[UploadTask], stop: threading.Event) -> list[UploadOutcome]:
        self.started.set()
        stop.wait()
        return [UploadOutcome("interrupted") for _ in tasks]

    def close(self) -> None:
        pass


def _ready(h: Harness) -> None:
    write_upload_keys(h.secrets_dir)
    deadline = time.monotonic() + 10
    while h.app.state.auth.api_keys.key_count() != 5 + len(UPLOAD_KEYS):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_restart_takes_up_every_unfinished_upload(
    tmp_path: Path, jwt_issuer: JwtIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    stalled = _Stalled()
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks(), upload_processor=lambda *_: stalled):
        _ready(h)
        h.corpus.add("kept", ["Indexed before the uploads: the canteen opens at noon."], ["eng"])
        files = [("first.txt", b"Alpha policy text.\n"), ("third.txt", b"Gamma policy text.\n")]
        r = upload(h, "tok-up-eng", files, groups="eng").json()
        assert stalled.started.wait(30)  # the worker holds both; a later upload waits in the queue
        later = upload(h, "tok-up-eng", [("second.txt", b"Beta policy text.\n")], groups="eng").json()
        ids = {d["name"]: d["doc_id"] for d in r["documents"] + later["documents"]}
        spool = h.app.state.uploads.spool.root
    embedder = HashEmbedder()
    stopped = open_edge(tmp_path / "index", name="api-test", model_id=embedder.model_id, dimension=embedder.dimension)
    try:
        states = {name: getattr(stopped.get_document(i), "status", None) for name, i in ids.items()}
        assert states == {"first.txt": "interrupted", "second.txt": "queued", "third.txt": "interrupted"}
        # As a process killed mid-write leaves it (no interrupted written): third says embedding, and its
        # spool file is lost meanwhile.
        third = stopped.get_document(ids["third.txt"])
        assert third is not None
        stopped.put_document(replace(third, status="embedding"))
        (spool / third.extra["spool"]).unlink()
        stopped.flush()
    finally:
        stopped.close()

    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        for h in make_harness(tmp_path, jwks=jwt_issuer.jwks()):
            _ready(h)
            drain(h)
            got = {
                name: h.client.get(f"/v1/documents/{i}", headers=auth("tok-up-eng")).json() for name, i in ids.items()
            }
            assert got["first.txt"]["status"] == got["second.txt"]["status"] == "indexed"
            assert (got["third.txt"]["status"], got["third.txt"]["reason"]) == ("failed", GONE)
            job = h.client.get(f"/v1/ingest/jobs/{r['job_id']}", headers=auth("tok-up-eng")).json()
            assert job["done"] and job["counts"]["indexed"] == 1 and job["counts"]["failed"] == 1
            # Nothing indexed before is lost.
            assert h.components.index.get_document("kept") is not None
            answer = h.client.post("/v1/search", json={"query": "canteen noon"}, headers=auth("tok-up-eng")).json()
            assert "kept" in {c["doc_id"] for c in answer["citations"]}
            assert spooled(h) == []
    changes = [
        (rec.audit["doc_ids"][0], rec.audit["outcome"])  # type: ignore[attr-defined]
        for rec in caplog.records
        if getattr(rec, "audit", {}).get("route") == "upload-worker"
    ]
    assert (ids["third.txt"], "status:interrupted") in changes and (ids["third.txt"], "status:failed") in changes
    assert (ids["first.txt"], "status:indexed") in changes


def test_spool_folders_no_record_names_are_removed_at_start(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    # A process killed while it received a request left its files, and never wrote their records.
    stray = tmp_path / "data" / "uploads" / "api-test" / ("ab" * 16) / "0"
    stray.mkdir(parents=True)
    (stray / "half.txt").write_bytes(b"half a request")
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks()):
        assert spooled(h) == []


def test_uploads_past_the_retention_time_are_deleted_and_audited(
    tmp_path: Path, jwt_issuer: JwtIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks(), uploads={"retention_s": 3600}):
        _ready(h)
        h.corpus.add("corpus-doc", ["A corpus document never expires."], ["eng"])
        r = upload(h, "tok-up-eng", [("old.txt", b"An old upload.\n")], groups="eng").json()
        drain(h)
        worker = h.app.state.uploads.worker
        doc_id = r["documents"][0]["doc_id"]
        # The clock, not a wait: an hour less a minute keeps it, an hour and a minute deletes it.
        now = time.time()
        worker.clock = lambda t=now + 3540: t
        assert worker.expire() == 0
        worker.clock = lambda t=now + 3660: t
        with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
            assert worker.expire() == 1
        assert h.components.index.get_document(doc_id) is None
        assert h.components.index.count_chunks(doc_id) == 0
        assert h.components.index.get_document("corpus-doc") is not None
        expired = [getattr(rec, "audit", {}) for rec in caplog.records]
        assert any(a.get("outcome") == "status:expired" and a.get("doc_ids") == [doc_id] for a in expired)
