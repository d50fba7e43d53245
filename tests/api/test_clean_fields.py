"""Clean fields: no control or bidi character leaves in any field, redirects ignore the Host
header, upstream usage is bounded, and facade validation errors name the parameter.

Controls and bidi characters are generated into every document field (title, source, page,
text, doc id) and into the LLM's reply; every string of every path (/v1/query JSON and stream,
/v1/search, the chat facade JSON and stream, /v1/documents) must be free of CR, FF, bidi
embeddings, overrides and isolates, and every C0/C1 control but line feed and tab.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.api.openai_schemas import MAX_TOKENS
from docquery.api.routes.openai_compat import usage_of
from docquery.core.domain import Chunk, DocumentRecord, IndexedChunk, TokenMeter
from tests.support.api_harness import Harness, bearer, chat_stream_text
from tests.support.api_harness import sse_events as events_of
from tests.support.fixtures import harness_fixture, standin_fixture
from tests.support.standins.openai_server import StandInOpenAIServer

AUTH = bearer("tok-alice-eng")
FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]]
_noisy = st.lists(
    st.one_of(st.sampled_from(_CONTROLS), st.sampled_from(["leave", "policy", " ", "\r\n", "x.md", "é"])),
    min_size=1,
    max_size=12,
).map("".join)


standin = standin_fixture(scope="module")
h = harness_fixture(llm_server="standin", retrieval={"min_dense_score": -1.0})


def _add(h: Harness, noise: str, n: int) -> None:
    doc_id = f"doc{noise}{n}"
    text = f"Vacation policy{noise} leave days.\r\nLine two\f{noise} of the leave policy."
    chunk = Chunk(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, doc_id)),
        doc_id=doc_id,
        source=f"dir{noise}/file.md",
        title=f"Title{noise}",
        chunk_index=0,
        text=text,
        content_sha256=hashlib.sha256(text.encode()).hexdigest(),
        acl_groups=("eng",),
        page=f"Guide{noise} > Part",
        ingested_at=f"2026{noise}",
    )
    h.corpus.index.upsert([IndexedChunk(chunk=chunk, dense=h.corpus.embedder.embed([text])[0])])
    h.corpus.index.put_document(
        DocumentRecord(
            doc_id=doc_id,
            source=chunk.source,
            root="/corpus",
            content_sha256="0" * 64,
            chunk_count=1,
            acl_groups=("eng",),
            title=chunk.title,
            ingested_at=chunk.ingested_at,
        )
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _assert_clean(where: str, value: Any) -> None:
    for text in _strings(value):
        assert not FORBIDDEN.search(text), (where, text)


_counter = iter(range(10**9))


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=_noisy, reply=_noisy)
def test_no_control_or_bidi_character_leaves_in_any_field(
    h: Harness, standin: StandInOpenAIServer, noise: str, reply: str
) -> None:
    _add(h, noise, next(_counter))
    standin.config.reply = ["The policy", reply, " gives leave [S1]."]
    q = {"question": "vacation policy leave days", "top_k": 5}
    chat = {"model": "docquery", "messages": [{"role": "user", "content": q["question"]}]}
    r = h.client.post("/v1/query", json=q, headers=AUTH).json()
    assert r["citations"]
    _assert_clean("query", r)
    _assert_clean("query stream", events_of(h.client.post("/v1/query", json={**q, "stream": True}, headers=AUTH).text))
    _assert_clean("search", h.client.post("/v1/search", json={"query": q["question"]}, headers=AUTH).json())
    _assert_clean("chat", h.client.post("/v1/chat/completions", json=chat, headers=AUTH).json())
    stream = h.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=AUTH).text
    _assert_clean("chat stream", chat_stream_text(stream))
    _assert_clean("documents", h.client.get("/v1/documents", headers=AUTH).json())


def test_snippets_keep_their_line_breaks(h: Harness) -> None:
    _add(h, "", next(_counter))
    cites = h.client.post("/v1/query", json={"question": "leave policy line two"}, headers=AUTH).json()["citations"]
    assert any("\n" in c["snippet"] for c in cites), cites


@pytest.mark.parametrize("path", ["/docs/", "/healthz/", "/v1/query/", "/openapi.json/"])
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8443", "127.0.0.1"])
def test_no_redirect_is_built_from_the_host_header(h: Harness, path: str, host: str) -> None:
    r = h.client.get(path, headers={"Host": host}, follow_redirects=False)
    assert r.status_code < 300 or r.status_code >= 400, (r.status_code, r.headers)
    assert "location" not in r.headers


@given(
    prompt=st.integers(min_value=0, max_value=10**40),
    completion=st.integers(min_value=0, max_value=10**40),
)
def test_upstream_usage_is_clamped(prompt: int, completion: int) -> None:
    meter = TokenMeter()
    meter.add({"prompt_tokens": prompt, "completion_tokens": completion})
    usage = usage_of(meter)
    assert usage.prompt_tokens == min(prompt, MAX_TOKENS)
    assert usage.completion_tokens == min(completion, MAX_TOKENS)
    assert usage.total_tokens == min(usage.prompt_tokens + usage.completion_tokens, MAX_TOKENS)


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": "docquery"}, "messages", "missing"),
        ({"model": "docquery", "messages": "hi"}, "messages", "list_type"),
        ({"model": "docquery", "messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role", "literal_error"),
        ({"model": "docquery", "messages": [{"role": "user", "content": 5}]}, "messages.0.content", "string_type"),
        (
            {"model": "docquery", "messages": [{"role": "user", "content": "x"}], "stream": "maybe"},
            "stream",
            "bool_parsing",
        ),
        ({"model": 5, "messages": [{"role": "user", "content": "x"}]}, "model", "string_type"),
    ],
)
def test_facade_validation_errors_carry_param_and_code(h: Harness, body: dict[str, Any], param: str, code: str) -> None:
    r = h.client.post("/v1/chat/completions", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code), error
    assert error["message"] == f"invalid request: {param}: {code}"


def test_a_field_the_client_invented_is_not_echoed(h: Harness) -> None:
    body = {"model": "docquery", "messages": [{"role": "user", "content": "x"}], "<img src=x>": 1}
    r = h.client.post("/v1/chat/completions", json=body, headers=AUTH)
    if r.status_code == 422:
        error = r.json()["error"]
        assert error["param"] is None and "<img" not in r.text
