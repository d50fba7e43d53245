"""The OpenAI facade driven by the official ``openai`` SDK, as a user's client would.

The real app is served by uvicorn on loopback with ``docquery serve``'s options, and
generates through the vLLM stand-in (tests/support/standins). The SDK validates the
responses strictly (``_strict_response_validation``), so a field of the wrong type, a
broken stream frame or an error shape the SDK does not map fails here.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import uvicorn

from docquery.api.server import server_options
from docquery.rag.conversation import CONDENSE_SYSTEM
from tests.support.api_harness import Harness
from tests.support.fixtures import harness_fixture
from tests.support.standins.openai_server import StandInOpenAIServer

KEY = "tok-alice-eng"
ASK = "how many vacation days of paid leave"
REPLY = ["You get 25 days ", "of paid leave ", "[S1]."]
DOCS = {
    "vac": "The vacation policy grants 25 days of paid leave per year to every employee.",
    "vpn": "Install the VPN client from the software center portal before you travel abroad.",
    "rooms": "Meeting rooms on every floor are reserved with the room calendar in the intranet.",
}
REWRITE = "Where do I install the VPN client from?"


class Replies:
    """The stand-in's answers: the condense prompt gets ``REWRITE``, any other prompt ``REPLY``."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> list[str]:
        self.calls.append(messages)
        return [REWRITE] if messages[0]["content"] == CONDENSE_SYSTEM else list(REPLY)


@pytest.fixture(scope="module")
def replies() -> Replies:
    return Replies()


@pytest.fixture(scope="module")
def llm(replies: Replies) -> Iterator[StandInOpenAIServer]:
    with StandInOpenAIServer() as s:
        s.config.reply = replies
        yield s


h = harness_fixture(
    *((doc_id, text, "eng") for doc_id, text in DOCS.items()),
    llm_server="llm",
    retrieval={"min_dense_score": -1.0, "top_k": 2},
)


@pytest.fixture(scope="module")
def base_url(h: Harness) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(h.app, lifespan="off", **server_options("critical")))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the app did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


def sdk(base_url: str, key: str = KEY) -> openai.OpenAI:
    # No retries: a refusal must surface as the SDK's exception on the first answer.
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=10.0, _strict_response_validation=True)


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with sdk(base_url) as c:
        yield c


def _user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_a_completion_has_content_citations_finish_reason_and_usage(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(model="docquery", messages=_user(ASK))
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.model == "docquery"
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    content = choice.message.content
    assert content is not None
    assert content.startswith("You get 25 days of paid leave [S1].")
    # The footer is markdown: file names a linkify renderer would link carry an escaped dot.
    assert content.endswith("\n\nSources:\n[S1] vac (vac\\.md)\n[S2] vpn (vpn\\.md)")
    extra = completion.model_extra or {}
    assert [(c["id"], c["doc_id"]) for c in extra["citations"]] == [("S1", "vac"), ("S2", "vpn")]
    assert extra["mode"] == "generative"
    assert extra["request_id"] == raw.headers["x-request-id"] and completion.id == f"chatcmpl-{extra['request_id']}"
    # The stand-in reports 10 prompt tokens and one completion token per reply chunk.
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 10
    assert completion.usage.completion_tokens == len(REPLY)
    assert completion.usage.total_tokens == 10 + len(REPLY)


def test_a_stream_joins_to_the_same_text_and_ends_with_usage(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="docquery", messages=_user(ASK))
    whole = completion.choices[0].message.content
    stream = client.chat.completions.create(
        model="docquery", messages=_user(ASK), stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.model == "docquery" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    cited = [x["doc_id"] for c in chunks for x in (c.model_extra or {}).get("citations") or []]
    assert cited == [x["doc_id"] for x in (completion.model_extra or {})["citations"]] == ["vac", "vpn"]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (10, 3, 13)
    assert all(c.usage is None for c in chunks[:-1])


def test_a_stream_without_include_usage_has_no_usage(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="docquery", messages=_user(ASK), stream=True))
    assert chunks and all(c.choices and c.usage is None for c in chunks)


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    assert [(m.id, m.object, m.owned_by, m.created) for m in client.models.list()] == [
        ("docquery", "model", "docquery", 0)
    ]
    model = client.models.retrieve("docquery")
    assert (model.id, model.object, model.owned_by, model.created) == ("docquery", "model", "docquery", 0)


@pytest.mark.parametrize("model", ["gpt-4o", "standin-model", "DocQuery", "docquery:latest"])
def test_an_unknown_model_is_not_found(client: openai.OpenAI, model: str) -> None:
    with pytest.raises(openai.NotFoundError) as chat:
        client.chat.completions.create(model=model, messages=_user(ASK))
    with pytest.raises(openai.NotFoundError) as retrieve:
        client.models.retrieve(model)
    for err in (chat.value, retrieve.value):
        assert err.status_code == 404 and err.code == "model_not_found" and err.param == "model"
        assert err.type == "invalid_request_error" and model not in err.message


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}, "tools"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}},
            "response_format",
        ),
        ({"logprobs": True}, "logprobs"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_what_cannot_be_honoured_is_unprocessable(
    client: openai.OpenAI, extra: dict[str, Any], param: str, stream: bool
) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(model="docquery", messages=_user(ASK), stream=stream, **extra)
    err = caught.value
    assert err.status_code == 422 and err.param == param and err.code == "unsupported_parameter"
    assert err.type == "invalid_request_error" and "\n" not in err.message


@pytest.mark.parametrize("key", ["wrong-key", "x", "TOK-ALICE-ENG", "tok-alice-engx", "eyJhbGciOiJub25lIn0.e30."])
def test_a_wrong_key_is_an_authentication_error(base_url: str, key: str) -> None:
    with sdk(base_url, key) as bad:
        with pytest.raises(openai.AuthenticationError) as caught:
            bad.chat.completions.create(model="docquery", messages=_user(ASK))
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    assert caught.value.status_code == 401 and caught.value.type == "unauthorized"


def test_a_key_without_the_query_role_is_permission_denied(base_url: str) -> None:
    with sdk(base_url, "tok-norole") as norole, pytest.raises(openai.PermissionDeniedError) as caught:
        norole.chat.completions.create(model="docquery", messages=_user(ASK))
    assert caught.value.status_code == 403 and caught.value.type == "forbidden"


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_is_answered_in_context(client: openai.OpenAI, replies: Replies, stream: bool) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "How do I install the VPN client?"},
        {"role": "assistant", "content": "Install it from the software center [S1]."},
        {"role": "user", "content": "and on which floor?"},  # alone, it matches the rooms document
    ]
    replies.calls.clear()
    if stream:
        chunks = list(client.chat.completions.create(model="docquery", messages=messages, stream=True))
        cited = [x["doc_id"] for c in chunks for x in (c.model_extra or {}).get("citations") or []]
    else:
        completion = client.chat.completions.create(model="docquery", messages=messages)
        cited = [x["doc_id"] for x in (completion.model_extra or {})["citations"]]
        # Two LLM calls: the rewrite (one chunk) and the answer.
        assert completion.usage is not None
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (20, 1 + len(REPLY))
    assert cited[0] == "vpn"
    condense, answer = replies.calls
    assert condense[0]["content"] == CONDENSE_SYSTEM and "install the VPN client" in condense[-1]["content"]
    # The rewrite only searched: the answer prompt asks the caller's own last question.
    assert REWRITE not in answer[-1]["content"] and "Question: and on which floor?\n" in answer[-1]["content"]


def test_a_failure_after_the_stream_started_raises_the_sdks_api_error(
    client: openai.OpenAI, llm: StandInOpenAIServer
) -> None:
    llm.config.drop_after_chunks = 1
    try:
        stream = client.chat.completions.create(model="docquery", messages=_user(ASK), stream=True)
        received: list[str] = []
        with pytest.raises(openai.APIError) as caught:
            received.extend(c.choices[0].delta.content or "" for c in stream if c.choices)
    finally:
        llm.config.drop_after_chunks = None
    assert "".join(received) == REPLY[0]
    assert caught.value.type == "llm_unavailable" and ASK not in caught.value.message


def test_the_async_client_streams_the_same_answer(base_url: str, client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="docquery", messages=_user(ASK)).choices[0].message.content

    async def drive() -> tuple[str, str]:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, max_retries=0, timeout=10.0, _strict_response_validation=True
        ) as aclient:
            stream = await aclient.chat.completions.create(model="docquery", messages=_user(ASK), stream=True)
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            return text, (await aclient.models.retrieve("docquery")).id

    assert asyncio.run(drive()) == (whole, "docquery")


@pytest.mark.parametrize("stream", [False, True])
def test_a_truncated_answer_finishes_with_length(client: openai.OpenAI, llm: StandInOpenAIServer, stream: bool) -> None:
    llm.config.finish_reason = "length"
    try:
        if stream:
            chunks = list(client.chat.completions.create(model="docquery", messages=_user(ASK), stream=True))
            finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        else:
            finish = client.chat.completions.create(model="docquery", messages=_user(ASK)).choices[0].finish_reason
    finally:
        llm.config.finish_reason = "stop"
    assert finish == "length"


def test_a_caller_who_may_see_nothing_gets_a_refusal_that_spent_no_tokens(
    base_url: str, llm: StandInOpenAIServer
) -> None:
    calls = llm.stats.chat_calls
    with sdk(base_url, "tok-nogroups") as nogroups:
        completion = nogroups.chat.completions.create(model="docquery", messages=_user(ASK))
    assert completion.choices[0].finish_reason == "stop" and completion.choices[0].message.content
    assert "25 days" not in completion.choices[0].message.content
    assert (completion.model_extra or {})["citations"] == []
    assert completion.usage is not None and completion.usage.total_tokens == 0
    assert llm.stats.chat_calls == calls  # the LLM was not asked
