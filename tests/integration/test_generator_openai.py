"""OpenAIChatGenerator over real HTTP against the vLLM stand-in on 127.0.0.1.

The stand-in (tests/support/standins/openai_server.py) is not vLLM; it speaks its
OpenAI-compatible protocol, including SSE framing and connection drops.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import SecretStr

from docquery.core.domain import Prompt
from docquery.core.errors import GeneratorError, GeneratorOverloaded, GeneratorUnavailable
from docquery.generators.openai_chat import OpenAIChatGenerator
from tests.support.standins.openai_server import DEFAULT_KEY, StandInOpenAIServer

CANARY = "CANARY-7f3e9c-upstream-echo"


def _prompt(text: str = "What is the leave policy?") -> Prompt:
    return Prompt(question=text, sources=(), messages=({"role": "user", "content": text},))


def _gen(server: StandInOpenAIServer, key: str | None = DEFAULT_KEY, **kw: float) -> OpenAIChatGenerator:
    params: dict[str, float] = {"max_retries": 2, "read_timeout_s": 5.0, "total_timeout_s": 10.0} | kw
    return OpenAIChatGenerator(
        base_url=server.base_url,
        model="standin-model",
        api_key=lambda: SecretStr(key) if key else None,
        connect_timeout_s=1.0,
        read_timeout_s=params["read_timeout_s"],
        total_timeout_s=params["total_timeout_s"],
        max_concurrency=int(params.get("max_concurrency", 4)),
        max_retries=int(params["max_retries"]),
    )


async def _collect(gen: OpenAIChatGenerator, prompt: Prompt) -> list[str]:
    return [d async for d in gen.stream(prompt)]


async def _complete_once(gen: OpenAIChatGenerator) -> str:
    """One completion, then the connection pool of this event loop is released."""
    try:
        return await gen.complete(_prompt())
    finally:
        await gen.aclose()


def test_non_stream_completion(standin: StandInOpenAIServer) -> None:
    gen = _gen(standin)
    assert asyncio.run(_complete_once(gen)) == "The answer is in the documents [S1]."
    assert standin.stats.chat_calls == 1


def test_stream_yields_each_chunk(standin: StandInOpenAIServer) -> None:
    standin.config.reply = ["a ", "b ", "c"]

    async def run() -> list[str]:
        gen = _gen(standin)
        try:
            return await _collect(gen, _prompt())
        finally:
            await gen.aclose()

    assert asyncio.run(run()) == ["a ", "b ", "c"]
    assert standin.stats.stream_calls == 1


def test_retries_before_first_token(standin: StandInOpenAIServer) -> None:
    standin.config.fail_statuses = [503, 502]

    async def run() -> list[str]:
        gen = _gen(standin, max_retries=2)
        try:
            return await _collect(gen, _prompt())
        finally:
            await gen.aclose()

    assert "".join(asyncio.run(run())) == "The answer is in the documents [S1]."
    assert standin.stats.chat_calls == 3


def test_retries_exhausted_is_overloaded_with_retry_after(standin: StandInOpenAIServer) -> None:
    standin.config.fail_statuses = [429, 429]
    standin.config.retry_after = "7"

    gen = _gen(standin, max_retries=1)
    with pytest.raises(GeneratorOverloaded) as info:
        asyncio.run(_complete_once(gen))
    assert info.value.status == 429
    assert info.value.retry_after == 7.0
    assert standin.stats.chat_calls == 2


def test_usable_from_successive_event_loops(standin: StandInOpenAIServer) -> None:
    """The connection pool belongs to one loop; ``aclose`` releases it and the next loop gets a new one."""
    gen = _gen(standin)
    first, second = asyncio.run(_complete_once(gen)), asyncio.run(_complete_once(gen))
    assert first == second == "The answer is in the documents [S1]."
    assert standin.stats.chat_calls == 2


def test_proxy_variables_do_not_reroute_prompts(standin: StandInOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy set in the environment would receive every prompt (document text); the client ignores it.
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    gen = _gen(standin, max_retries=0)
    assert asyncio.run(_complete_once(gen)) == "The answer is in the documents [S1]."
    assert standin.stats.chat_calls == 1


def test_oversized_completion_is_refused_not_buffered(standin: StandInOpenAIServer) -> None:
    standin.config.reply = ["x" * (5 * 1024 * 1024)]  # past the 4 MiB cap on a non-streamed body

    gen = _gen(standin, max_retries=0)
    with pytest.raises(GeneratorError, match="too large"):
        asyncio.run(_complete_once(gen))


def test_no_retry_after_first_token(standin: StandInOpenAIServer) -> None:
    standin.config.reply = ["one ", "two ", "three ", "four"]
    standin.config.drop_after_chunks = 2
    got: list[str] = []

    async def run() -> None:
        gen = _gen(standin, max_retries=3)
        try:
            async for d in gen.stream(_prompt()):
                got.append(d)
        finally:
            await gen.aclose()

    with pytest.raises(GeneratorUnavailable):
        asyncio.run(run())
    assert got == ["one ", "two "]
    assert standin.stats.chat_calls == 1  # the partial answer was not re-requested


@pytest.mark.slow  # bounds the wall-clock time
def test_read_timeout_is_unavailable_not_a_hang(standin: StandInOpenAIServer) -> None:
    standin.config.first_token_delay_s = 3.0

    gen = _gen(standin, max_retries=0, read_timeout_s=0.2)
    t0 = time.monotonic()
    with pytest.raises(GeneratorUnavailable):
        asyncio.run(_complete_once(gen))
    assert time.monotonic() - t0 < 2.0


@pytest.mark.slow  # bounds the wall-clock time
def test_total_deadline_bounds_a_trickling_stream(standin: StandInOpenAIServer) -> None:
    standin.config.reply = [f"t{i} " for i in range(50)]
    standin.config.token_delay_s = 0.05  # each read is quick, the whole is not

    async def run() -> None:
        gen = _gen(standin, max_retries=0, read_timeout_s=1.0, total_timeout_s=0.4)
        try:
            await _collect(gen, _prompt())
        finally:
            await gen.aclose()

    t0 = time.monotonic()
    with pytest.raises(GeneratorUnavailable):
        asyncio.run(run())
    assert time.monotonic() - t0 < 2.0


def test_in_flight_bound_fails_fast_with_overloaded(standin: StandInOpenAIServer) -> None:
    standin.config.first_token_delay_s = 0.3

    async def run() -> list[BaseException | str]:
        gen = _gen(standin, max_concurrency=1)
        try:
            return list(await asyncio.gather(gen.complete(_prompt()), gen.complete(_prompt()), return_exceptions=True))
        finally:
            await gen.aclose()

    results = asyncio.run(run())
    assert sum(isinstance(r, str) for r in results) == 1
    overloaded = [r for r in results if isinstance(r, GeneratorOverloaded)]
    assert len(overloaded) == 1 and overloaded[0].retry_after
    assert standin.stats.chat_calls == 1  # the refused call never reached the server


def test_api_key_is_read_per_call(standin: StandInOpenAIServer) -> None:
    keys = iter(["old-key", "new-key"])
    standin.config.api_keys = {"old-key", "new-key"}

    async def run() -> None:
        gen = OpenAIChatGenerator(
            base_url=standin.base_url, model="m", api_key=lambda: SecretStr(next(keys)), max_retries=0
        )
        try:
            await gen.complete(_prompt())
            await gen.complete(_prompt())
        finally:
            await gen.aclose()

    asyncio.run(run())
    assert standin.stats.auth_seen == ["old-key", "new-key"]


def test_rejected_key_is_an_error_without_retry(standin: StandInOpenAIServer) -> None:
    gen = _gen(standin, key="wrong")
    with pytest.raises(GeneratorError) as info:
        asyncio.run(_complete_once(gen))
    assert info.value.status == 401
    assert standin.stats.chat_calls == 1


@pytest.mark.parametrize("status", [400, 500, 503])
def test_upstream_error_body_is_not_leaked(standin: StandInOpenAIServer, status: int) -> None:
    standin.config.fail_statuses = [status] * 5

    async def run() -> None:
        gen = _gen(standin, max_retries=1)
        try:
            await _collect(gen, _prompt(f"question with {CANARY}"))
        finally:
            await gen.aclose()

    with pytest.raises(GeneratorError) as info:
        asyncio.run(run())
    assert info.value.status == status
    for text in (str(info.value), repr(info.value), str(info.value.__cause__), str(info.value.__context__)):
        assert CANARY not in text


def test_ready_probe(standin: StandInOpenAIServer) -> None:
    async def run(key: str) -> bool:
        gen = _gen(standin, key=key)
        try:
            return await gen.ready()
        finally:
            await gen.aclose()

    assert asyncio.run(run(DEFAULT_KEY)) is True
    assert asyncio.run(run("wrong")) is False
