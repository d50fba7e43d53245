"""Limits: body size (413, also for chunked bodies), input bounds (422, never echoing input), rate limit (429)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.types import Message

from docquery.api.limits import BodyLimitMiddleware, RateLimiter
from tests.support.api_harness import Harness, bearer
from tests.support.fixtures import VACATION, harness_fixture

CANARY = "CANARY-limits-5c1d0e"
AUTH = bearer("tok-alice-eng")


h = harness_fixture(VACATION)


def _envelope(r: object, status: int, type_: str) -> dict[str, str]:
    assert getattr(r, "status_code") == status  # noqa: B009
    body = r.json()["error"]  # type: ignore[attr-defined]
    assert body["type"] == type_ and body["request_id"]
    return body  # type: ignore[no-any-return]


def test_413_by_content_length(h: Harness) -> None:
    big = json.dumps({"question": "x" * (h.settings.api.max_body_bytes + 10)})
    r = h.client.post("/v1/query", content=big, headers={**AUTH, "content-type": "application/json"})
    _envelope(r, 413, "payload_too_large")


def test_413_for_a_chunked_body_without_length(h: Harness) -> None:
    def body() -> Iterator[bytes]:
        yield b'{"question": "'
        for _ in range(200):
            yield b"y" * 1024
        yield b'"}'

    r = h.client.post("/v1/query", content=body(), headers={**AUTH, "content-type": "application/json"})
    _envelope(r, 413, "payload_too_large")


def test_body_limit_stops_reading_at_the_bound() -> None:
    """Pure ASGI check: the middleware stops pulling chunks once past the limit."""
    pulled = 0

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"z" * 1000, "more_body": True}  # endless

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("the app must not run")

    mw = BodyLimitMiddleware(app, max_bytes=4096)  # type: ignore[arg-type]
    scope = {"type": "http", "method": "POST", "path": "/v1/query", "headers": [], "state": {}}
    asyncio.run(mw(scope, receive, send))
    assert sent[0]["status"] == 413
    assert pulled == 5  # 5 KB read, then stop


@pytest.mark.parametrize(
    "body",
    [
        {"question": CANARY + " " + "q" * 3000},  # longer than api.max_question_chars
        {"question": "   "},
        {"question": ""},
        {"question": CANARY, "top_k": 51},  # above retrieval.max_top_k
        {"question": CANARY, "top_k": 0},
        {"question": CANARY, "top_k": 10_000},
        {"question": CANARY, "top_k": "many-" + CANARY},
        {"question": [CANARY]},
        {"question": CANARY, CANARY: 1},
        {"question": CANARY, "groups": ["hr"]},
        {},
    ],
)
def test_422_bounds_and_no_echo(h: Harness, body: dict[str, object]) -> None:
    r = h.client.post("/v1/query", json=body, headers=AUTH)
    err = _envelope(r, 422, "invalid_request")
    assert CANARY not in r.text
    assert "q" * 50 not in err["message"]


def test_422_invalid_json_does_not_echo(h: Harness) -> None:
    r = h.client.post(
        "/v1/query",
        content=b'{"question": "' + CANARY.encode() + b'"',
        headers={**AUTH, "content-type": "application/json"},
    )
    _envelope(r, 422, "invalid_request")
    assert CANARY not in r.text


def test_422_on_search_and_chat(h: Harness) -> None:
    r = h.client.post("/v1/search", json={"query": CANARY * 200}, headers=AUTH)
    _envelope(r, 422, "invalid_request")
    r = h.client.post("/v1/chat/completions", json={"model": "m", "messages": []}, headers=AUTH)
    _envelope(r, 422, "invalid_request_error")  # a body the facade's schema refuses, in OpenAI's shape
    r = h.client.post(
        "/v1/chat/completions",
        json={"model": "docquery", "messages": [{"role": "system", "content": CANARY}]},
        headers=AUTH,
    )
    _envelope(r, 422, "invalid_request")
    assert CANARY not in r.text


def test_429_per_principal_with_retry_after(h: Harness) -> None:
    original = h.app.state.limiter
    h.app.state.limiter = RateLimiter(per_minute=6, burst=3)
    try:
        codes = [h.client.get("/v1/models", headers=AUTH).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = h.client.get("/v1/models", headers=AUTH)
        _envelope(r, 429, "rate_limited")
        assert 1 <= int(r.headers["retry-after"]) <= 10
        # Another principal has its own bucket.
        assert h.client.get("/v1/models", headers=bearer("tok-bob-hr")).status_code == 200
    finally:
        h.app.state.limiter = original


def test_token_bucket_refills() -> None:
    now = [0.0]
    rl = RateLimiter(per_minute=60, burst=2, clock=lambda: now[0])
    assert rl.take("a") is None and rl.take("a") is None
    wait = rl.take("a")
    assert wait is not None and 0.9 <= wait <= 1.0
    now[0] += 1.0
    assert rl.take("a") is None


def test_404_and_405_use_the_envelope(h: Harness) -> None:
    r = h.client.get(f"/v1/{CANARY}", headers=AUTH)
    _envelope(r, 404, "not_found")
    assert CANARY not in r.text
    # Without a credential every /v1/ path is a 401, one that exists or not: nothing to enumerate.
    _envelope(h.client.get(f"/v1/{CANARY}"), 401, "unauthorized")
    r = h.client.put("/v1/query", headers=AUTH)
    _envelope(r, 405, "method_not_allowed")


# Every place a caller's text stands in a request body, and the endpoint that takes it.
def _chat(*messages: dict[str, object]) -> dict[str, object]:
    return {"model": "docquery", "messages": list(messages)}


_TEXT_FIELDS: list[tuple[str, Callable[[str], dict[str, object]]]] = [
    ("/v1/query", lambda t: {"question": t}),
    ("/v1/query", lambda t: {"question": "leave days", "history": [{"role": "user", "content": t}]}),
    ("/v1/search", lambda t: {"query": t}),
    ("/v1/chat/completions", lambda t: _chat({"role": "user", "content": t})),
    ("/v1/chat/completions", lambda t: _chat({"role": "user", "content": [{"type": "text", "text": t}]})),
    ("/v1/chat/completions", lambda t: _chat({"role": "user", "content": t}, {"role": "user", "content": "and?"})),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.sampled_from(_TEXT_FIELDS),
    before=st.text(max_size=20),
    surrogate=st.integers(0xD800, 0xDFFF).map(chr),
    after=st.text(max_size=20),
)
def test_text_that_is_not_unicode_is_a_422_wherever_it_stands(
    h: Harness, where: tuple[str, Callable[[str], dict[str, object]]], before: str, surrogate: str, after: str
) -> None:
    # A lone surrogate can only travel as a JSON escape ("\ud800"); json.dumps writes it so.
    endpoint, body = where
    content = json.dumps(body(before + surrogate + after))
    r = h.client.post(endpoint, content=content, headers={**AUTH, "content-type": "application/json"})
    # The caller's mistake, not an outage (503 with Retry-After); the facade answers in OpenAI's shape.
    _envelope(r, 422, "invalid_request_error" if endpoint == "/v1/chat/completions" else "invalid_request")


@pytest.mark.parametrize(
    "raw", [b'{"question": "expense \xc3\x28 report"}', b'{"question": "\xff\xfe"}', b"\xef\xbb\xbf\x80{}", b"{bad"]
)
def test_a_body_that_is_not_json_text_is_a_422(h: Harness, raw: bytes) -> None:
    r = h.client.post("/v1/query", content=raw, headers={**AUTH, "content-type": "application/json"})
    assert _envelope(r, 422, "invalid_request")["message"] == "invalid request: the body is not valid JSON"
