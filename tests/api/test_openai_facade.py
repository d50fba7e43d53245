"""The OpenAI facade: usage from the served model, refusal of what it cannot honour, models.retrieve.

The real app on the embedded index, generating through the vLLM stand-in over
loopback HTTP (tests/support/standins): the stand-in reports usage as vLLM does
(``usage`` on a completion; a last choice-less chunk when the request sets
``stream_options.include_usage``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from docquery.api.openai_schemas import ChatCompletion, ChatCompletionChunk
from tests.support.api_harness import Harness, bearer, chat_stream_text
from tests.support.fixtures import VACATION_PER_YEAR, harness_fixture
from tests.support.standins.openai_server import StandInOpenAIServer

AUTH = bearer("tok-alice-eng")
ASK = [{"role": "user", "content": "how many vacation days of paid leave"}]
CHAT: dict[str, Any] = {"model": "docquery", "messages": ASK}
REPLY = ["You get 25 days ", "of paid leave ", "[S1]."]


@pytest.fixture(scope="module")
def server() -> Iterator[StandInOpenAIServer]:
    with StandInOpenAIServer() as s:
        s.config.reply = REPLY
        yield s


h = harness_fixture(VACATION_PER_YEAR, llm_server="server")


def _openai_error(r: Any, status: int, param: str, code: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["code"] == code
    assert error["message"] and "\n" not in error["message"] and error["request_id"]


def test_usage_is_the_served_models_count(h: Harness) -> None:
    r = h.client.post("/v1/chat/completions", json=CHAT, headers=AUTH)
    body = ChatCompletion.model_validate(r.json())
    # The stand-in reports 10 prompt tokens and one completion token per chunk.
    assert body.usage.model_dump() == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


def test_usage_adds_the_follow_up_rewrite(h: Harness) -> None:
    turns = [{"role": "user", "content": "vacation policy"}, {"role": "assistant", "content": "25 days [S1]."}]
    r = h.client.post("/v1/chat/completions", json={**CHAT, "messages": turns + ASK}, headers=AUTH)
    usage = r.json()["usage"]
    assert usage == {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}


def test_stream_usage_is_a_last_chunk_without_choices(h: Harness) -> None:
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    r = h.client.post("/v1/chat/completions", json=body, headers=AUTH)
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n")
    text, chunks = chat_stream_text(r.text)
    assert text.startswith("You get 25 days of paid leave [S1].")
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    last = chunks[-1]
    assert last["choices"] == [] and last["usage"] == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    assert all("usage" not in c for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_stream_without_include_usage_has_no_usage_chunk(h: Harness) -> None:
    for options in (None, {"include_usage": False}):
        body = {**CHAT, "stream": True, **({"stream_options": options} if options is not None else {})}
        _, chunks = chat_stream_text(h.client.post("/v1/chat/completions", json=body, headers=AUTH).text)
        assert all("usage" not in c and c["choices"] for c in chunks)


def test_extractive_answers_spend_no_model_tokens(shared_harness: Harness) -> None:
    shared_harness.corpus.add("vac2", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
    r = shared_harness.client.post("/v1/chat/completions", json=CHAT, headers=AUTH)
    assert r.json()["mode"] == "extractive"
    assert r.json()["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "standin-model",
        "DocQuery",
        "DOCQUERY",
        "docquery ",
        " docquery",
        "docquery\n",
        "docquery/",
        "dоcquery",  # Cyrillic o
        "",
        "x" * 256,
        "docquery:latest",
    ],
)
def test_an_unknown_model_is_refused(h: Harness, model: str) -> None:
    r = h.client.post("/v1/chat/completions", json={**CHAT, "model": model}, headers=AUTH)
    _openai_error(r, 404, "model", "model_not_found")
    assert model.strip() == "" or model not in r.text  # the client's text is not echoed
    if model and "/" not in model:  # a slash is another path, not a model id
        r = h.client.get(f"/v1/models/{quote(model, safe='')}", headers=AUTH)
        _openai_error(r, 404, "model", "model_not_found")


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"n": 0}, "n"),
        ({"n": 128}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice"),
        ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
        ({"function_call": "auto"}, "function_call"),
        ({"function_call": {"name": "f"}}, "function_call"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}}, "response_format"),
        ({"response_format": {"type": "text", "json_schema": {}}}, "response_format"),
        ({"response_format": "json"}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
    ],
)
def test_what_cannot_be_honoured_is_a_422(h: Harness, extra: dict[str, Any], param: str) -> None:
    for stream in (False, True):
        r = h.client.post("/v1/chat/completions", json={**CHAT, **extra, "stream": stream}, headers=AUTH)
        _openai_error(r, 422, param, "unsupported_parameter")


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"n": 1},
        {"tools": []},
        {"tool_choice": "none"},
        {"response_format": {"type": "text"}},
        {"logprobs": False},
        {"temperature": 0.2, "max_tokens": 50, "top_p": 0.9, "user": "u1", "seed": 3},
    ],
)
def test_what_is_honoured_or_harmless_is_accepted(h: Harness, extra: dict[str, Any]) -> None:
    r = h.client.post("/v1/chat/completions", json={**CHAT, **extra}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"]) == 1


def test_models_retrieve(h: Harness) -> None:
    r = h.client.get("/v1/models/docquery", headers=AUTH)
    assert r.status_code == 200
    assert r.json() == {"id": "docquery", "object": "model", "created": 0, "owned_by": "docquery"}
    listed = h.client.get("/v1/models", headers=AUTH).json()["data"]
    assert [m["id"] for m in listed] == ["docquery"]
    assert h.client.get("/v1/models/docquery").status_code == 401
    assert (
        json.loads(h.client.get("/v1/models/docquery", headers=bearer("tok-norole")).text)["error"]["type"]
        == "forbidden"
    )
