"""``/readyz`` reflects what the query pod itself can serve.

The real app, the real embedded index and the stand-in OpenAI server: with the LLM
down the pod stays ready (search works, generation is 503), and the body says
which; an empty index is reported as such.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api_harness import Harness, JwtIssuer, bearer, llm_generator, make_harness
from tests.support.standins.openai_server import StandInOpenAIServer

AUTH = bearer("tok-alice-eng")
Q = {"question": "how many vacation days of paid leave"}


def _fresh_counts(h: Harness) -> None:
    h.app.state.readyz_index_counts = None  # the probe reuses its count for a few seconds


@pytest.fixture
def dead_llm() -> Iterator[StandInOpenAIServer]:
    server = StandInOpenAIServer()
    server.start()
    server.stop()  # nothing listens on its port any more
    yield server


@pytest.fixture
def live_llm() -> Iterator[StandInOpenAIServer]:
    with StandInOpenAIServer() as server:
        yield server


def _harness(tmp: Path, issuer: JwtIssuer, server: StandInOpenAIServer | None, *, docs: bool) -> Iterator[Harness]:
    gen = llm_generator(server) if server is not None else None
    for h in make_harness(tmp, generator=gen, jwks=issuer.jwks()):
        if docs:
            h.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        yield h


def test_ready_with_the_llm_up(tmp_path: Path, jwt_issuer: JwtIssuer, live_llm: StandInOpenAIServer) -> None:
    for h in _harness(tmp_path, jwt_issuer, live_llm, docs=True):
        r = h.client.get("/readyz")
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "ready"
        assert body["checks"] == {"components": True, "index": True, "embedder": True, "llm": True}
        assert body["llm"] == {"state": "ready", "generation": "available"}
        assert body["index"] == {"state": "ready", "documents": 1, "chunks": 1}


def test_llm_down_keeps_the_pod_ready_and_says_so(
    tmp_path: Path, jwt_issuer: JwtIssuer, dead_llm: StandInOpenAIServer
) -> None:
    for h in _harness(tmp_path, jwt_issuer, dead_llm, docs=True):
        r = h.client.get("/readyz")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "degraded"
        assert body["checks"]["llm"] is False and body["checks"]["index"] is True
        assert body["llm"] == {"state": "unavailable", "generation": "unavailable"}
        # What the body promises: search works, generation answers 503.
        s = h.client.post("/v1/search", json={"query": Q["question"], "top_k": 5}, headers=AUTH)
        assert s.status_code == 200 and s.json()["citations"]
        g = h.client.post("/v1/query", json=Q, headers=AUTH)
        assert g.status_code == 503 and g.json()["error"]["type"] == "llm_unavailable"


def test_an_empty_index_is_reported_as_empty(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in _harness(tmp_path, jwt_issuer, None, docs=False):
        r = h.client.get("/readyz")
        assert r.status_code == 200
        assert r.json()["index"] == {"state": "empty", "documents": 0, "chunks": 0}
        h.corpus.add("a", ["alpha text"], ["eng"])
        h.corpus.add("b", ["beta text", "gamma text"], ["eng"])
        _fresh_counts(h)
        assert h.client.get("/readyz").json()["index"] == {"state": "ready", "documents": 2, "chunks": 3}


def test_without_an_llm_answers_are_extractive(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in _harness(tmp_path, jwt_issuer, None, docs=True):
        body = h.client.get("/readyz").json()
        assert body["status"] == "ready" and "llm" not in body["checks"]
        assert body["llm"] == {"state": "not_configured", "generation": "extractive"}


def test_index_not_ready_takes_the_pod_out(
    tmp_path: Path, jwt_issuer: JwtIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for h in _harness(tmp_path, jwt_issuer, None, docs=True):
        monkeypatch.setattr(h.components.index, "ready", lambda: False)
        r = h.client.get("/readyz")
        assert r.status_code == 503 and r.headers["retry-after"] == "2"
        body = r.json()
        assert body["error"]["type"] == "not_ready" and body["checks"]["index"] is False
        assert body["index"] == {"state": "unavailable"}


def test_a_failing_probe_logs_no_detail(
    tmp_path: Path, jwt_issuer: JwtIssuer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom() -> bool:
        raise RuntimeError("secret-path /vault/secrets/qdrant-api-key")

    for h in _harness(tmp_path, jwt_issuer, None, docs=True):
        monkeypatch.setattr(h.components.index, "ready", boom)
        r = h.client.get("/readyz")
        assert r.status_code == 503
        assert "secret-path" not in r.text and "secret-path" not in caplog.text
        assert "RuntimeError" in caplog.text


class _Warming:
    """An upload processor whose parse process is started ahead once ``warm`` is set."""

    def __init__(self) -> None:
        self.warm = False

    def ready(self) -> bool:
        return self.warm

    def process(self, tasks: object, stop: object) -> list[object]:
        raise AssertionError("no upload in this test")

    def close(self) -> None:
        pass


def test_the_upload_worker_is_reported_never_required(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    processor = _Warming()
    (tmp_path / "on").mkdir()
    for h in make_harness(tmp_path / "on", jwks=jwt_issuer.jwks(), upload_processor=lambda *_: processor):
        starting = h.client.get("/readyz")
        assert starting.status_code == 200 and starting.json()["uploads"] == {"state": "starting"}
        assert starting.json()["status"] == "ready"
        processor.warm = True
        assert h.client.get("/readyz").json()["uploads"] == {"state": "ready"}
    (tmp_path / "off").mkdir()
    for h in make_harness(tmp_path / "off", jwks=jwt_issuer.jwks(), uploads={"enabled": False}):
        assert h.client.get("/readyz").json()["uploads"] == {"state": "off"}
