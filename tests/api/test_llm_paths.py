"""Generation through the stand-in LLM: refusal, overload (503), LLM down or slow, mid-stream failure, readiness.

The stand-in is not vLLM; it speaks vLLM's OpenAI-compatible protocol on 127.0.0.1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from docquery.core.ports import Generator
from docquery.rag.prompting import REFUSAL
from tests.support.api_harness import (
    Harness,
    bearer,
    chat_stream_text,
    llm_generator,
    sse_events,
)
from tests.support.fixtures import VACATION_PER_YEAR, harness_fixture
from tests.support.standins.openai_server import StandInOpenAIServer

AUTH = bearer("tok-alice-eng")
Q = {"question": "how many vacation days of paid leave"}
CHAT = {"model": "docquery", "messages": [{"role": "user", "content": Q["question"]}]}


h = harness_fixture(VACATION_PER_YEAR, llm_server="server")


@pytest.fixture(autouse=True)
def _reset(server: StandInOpenAIServer) -> None:
    c = server.config
    c.reply = ["You get 25 days ", "of paid leave [S1]."]
    c.first_token_delay_s = c.token_delay_s = 0.0
    c.fail_statuses = []
    c.drop_after_chunks = None
    c.retry_after = None


@pytest.fixture
def swap(h: Harness) -> Iterator[Any]:
    original = h.components.pipeline.generator

    def use(gen: Generator) -> None:
        h.components.pipeline.generator = gen
        h.components.generator = gen

    yield use
    h.components.pipeline.generator = h.components.generator = original


def test_generative_answer_with_citations(h: Harness) -> None:
    r = h.client.post("/v1/query", json=Q, headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    assert body["mode"] == "generative" and body["model"] == "standin-model"
    assert body["answer"] == "You get 25 days of paid leave [S1]."
    assert [c["id"] for c in body["citations"]] == ["S1"]
    assert "llm;dur=" in r.headers["server-timing"]


def test_invented_citations_are_dropped(h: Harness, server: StandInOpenAIServer) -> None:
    server.config.reply = ["Yes [S1] and [S", "7] and [S", "1]."]
    r = h.client.post("/v1/query", json={**Q, "stream": True}, headers=AUTH)
    text = "".join(d["text"] for e, d in sse_events(r.text) if e == "delta")
    assert text == "Yes [S1] and  and [S1]."


@pytest.mark.parametrize("auth", ["tok-alice-eng", "tok-nogroups", "tok-bob-hr"])
def test_refusal_without_relevant_context_never_calls_the_llm(
    h: Harness, server: StandInOpenAIServer, auth: str
) -> None:
    question = "zebra quantum origami" if auth == "tok-alice-eng" else Q["question"]
    before = server.stats.chat_calls
    r = h.client.post("/v1/query", json={"question": question}, headers=bearer(auth))
    assert r.status_code == 200
    assert r.json()["answer"] == REFUSAL and r.json()["citations"] == []

    r = h.client.post("/v1/query", json={"question": question, "stream": True}, headers=bearer(auth))
    events = sse_events(r.text)
    assert events[0] == ("citations", {"citations": []})
    assert "".join(d["text"] for e, d in events if e == "delta") == REFUSAL
    assert events[-1][0] == "done"

    chat = {"model": "docquery", "messages": [{"role": "user", "content": question}]}
    r = h.client.post("/v1/chat/completions", json=chat, headers=bearer(auth))
    assert r.json()["choices"][0]["message"]["content"] == REFUSAL and r.json()["citations"] == []
    r = h.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=bearer(auth))
    assert chat_stream_text(r.text)[0] == REFUSAL
    assert server.stats.chat_calls == before


@pytest.mark.parametrize("stream", [False, True])
def test_overloaded_llm_gives_503_with_retry_after(
    h: Harness, server: StandInOpenAIServer, swap: Any, stream: bool
) -> None:
    swap(llm_generator(server, max_concurrency=1))
    server.config.first_token_delay_s = 0.6

    def ask(_: int) -> Any:
        return h.client.post("/v1/query", json={**Q, "stream": stream}, headers=AUTH)

    with ThreadPoolExecutor(max_workers=3) as pool:
        responses = list(pool.map(ask, range(3)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 503, 503]
    for r in responses:
        if r.status_code == 503:
            assert r.json()["error"]["type"] == "overloaded"
            assert int(r.headers["retry-after"]) >= 1


def test_upstream_429_is_503_with_retry_after(h: Harness, server: StandInOpenAIServer) -> None:
    server.config.fail_statuses = [429]
    server.config.retry_after = "9"
    r = h.client.post("/v1/query", json=Q, headers=AUTH)
    assert r.status_code == 503 and r.headers["retry-after"] == "9"


@pytest.mark.slow  # bounds the wall-clock time
def test_llm_down_is_a_clean_503(h: Harness, swap: Any) -> None:
    dead = StandInOpenAIServer()
    dead.start()
    dead.stop()  # the port is closed now: connection refused
    swap(llm_generator(dead))
    for body in (Q, {**Q, "stream": True}):
        t0 = time.monotonic()
        r = h.client.post("/v1/query", json=body, headers=AUTH)
        assert time.monotonic() - t0 < 3
        assert r.status_code == 503
        assert r.json()["error"]["type"] == "llm_unavailable" and r.headers["retry-after"]
        assert "Traceback" not in r.text
    r = h.client.post("/v1/chat/completions", json=CHAT, headers=AUTH)
    assert r.status_code == 503


@pytest.mark.slow  # bounds the wall-clock time
def test_slow_llm_times_out_with_503(h: Harness, server: StandInOpenAIServer, swap: Any) -> None:
    swap(llm_generator(server, read_timeout_s=0.3))
    server.config.first_token_delay_s = 2.0
    t0 = time.monotonic()
    r = h.client.post("/v1/query", json={**Q, "stream": True}, headers=AUTH)
    assert time.monotonic() - t0 < 1.5
    assert r.status_code == 503 and r.json()["error"]["type"] == "llm_unavailable"


def test_upstream_client_error_is_502_without_body(h: Harness, server: StandInOpenAIServer) -> None:
    server.config.fail_statuses = [400]
    r = h.client.post("/v1/query", json=Q, headers=AUTH)
    assert r.status_code == 502 and r.json()["error"]["type"] == "llm_error"
    assert "upstream failure" not in r.text and "vacation" not in r.text


def test_failure_after_first_token_is_an_error_event(h: Harness, server: StandInOpenAIServer) -> None:
    server.config.reply = ["one ", "two ", "three"]
    server.config.drop_after_chunks = 1
    r = h.client.post("/v1/query", json={**Q, "stream": True}, headers=AUTH)
    assert r.status_code == 200
    events = sse_events(r.text)
    assert [e for e, _ in events] == ["citations", "delta", "error"]
    assert events[-1][1]["error"]["type"] == "llm_unavailable"
    assert events[-1][1]["error"]["request_id"] == r.headers["x-request-id"]

    r = h.client.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers=AUTH)
    assert r.status_code == 200 and '"error"' in r.text and r.text.rstrip().endswith("data: [DONE]")


def test_readyz_checks_the_llm(h: Harness, swap: Any) -> None:
    r = h.client.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"] == {
        "components": True,
        "index": True,
        "embedder": True,
        "llm": True,
    }
    dead = StandInOpenAIServer()
    dead.start()
    dead.stop()
    swap(llm_generator(dead))
    r = h.client.get("/readyz")
    # The LLM is reported, not required: search still works (tests/api/test_readyz.py).
    assert r.status_code == 200 and r.json()["checks"]["llm"] is False
    assert r.json()["status"] == "degraded"
    assert h.client.get("/healthz").json() == {"status": "ok"}


def test_client_disconnect_mid_stream_frees_the_llm_slot(h: Harness, server: StandInOpenAIServer, swap: Any) -> None:
    """Over a real socket: a client that goes away mid-answer must not leak an in-flight LLM slot."""
    import socket
    import threading

    import httpx
    import uvicorn

    gen = llm_generator(server, max_concurrency=1)
    swap(gen)
    server.config.reply = [f"w{i} " for i in range(40)]
    server.config.token_delay_s = 0.05
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(h.app, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not uv.started and time.monotonic() < deadline:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port}/v1/query"
        with (
            httpx.Client(timeout=5) as client,
            client.stream("POST", url, json={**Q, "stream": True}, headers=AUTH) as r,
        ):
            assert r.status_code == 200
            for line in r.iter_lines():
                if line == "event: delta":
                    break  # leave mid-answer: the connection closes here
        deadline = time.monotonic() + 3
        while gen.in_flight and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.05)
        assert gen.in_flight == 0  # type: ignore[attr-defined]
        server.config.token_delay_s = 0.0
        r2 = httpx.post(url, json=Q, headers=AUTH, timeout=5)
        assert r2.status_code == 200
    finally:
        uv.should_exit = True
        thread.join(timeout=5)
        sock.close()
