"""OpenAIEmbedder over real HTTP against the vLLM stand-in on 127.0.0.1 (not vLLM).

Both clients are covered: ``embed`` (blocking, used by ingest) and ``aembed``
(awaited by the query path). They must agree, read the key per call, keep
upstream bodies out of errors, and ignore proxy variables.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import SecretStr

from docquery.config.settings import Settings
from docquery.core.errors import EmbedderError, EmbedderUnreachable
from docquery.core.ports import Embedder
from docquery.embedders.remote import OpenAIEmbedder
from docquery.wiring import build_embedder
from tests.support.standins.openai_server import DEFAULT_KEY, StandInOpenAIServer, hash_vector

CANARY = "CANARY-5b1d04-embedding-text"


def _embedder(server: StandInOpenAIServer, key: str = DEFAULT_KEY, **kw: int) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        base_url=server.base_url, model="standin-embed", api_key=lambda: SecretStr(key), dimension=64, **kw
    )


async def _aembed_once(emb: OpenAIEmbedder, texts: Sequence[str]) -> list[list[float]]:
    """One awaited call, then this event loop's connection pool is released."""
    try:
        return await emb.aembed(texts, query=True)
    finally:
        await emb.aclose()


def test_embedder_against_standin(standin: StandInOpenAIServer) -> None:
    standin.config.embedding_dim = 32
    seen: list[str] = []

    def key() -> SecretStr:
        seen.append("read")
        return SecretStr(DEFAULT_KEY)

    emb = OpenAIEmbedder(base_url=standin.base_url, model="standin-embed", api_key=key, batch_size=2)
    try:
        assert emb.dimension == 32
        vectors = emb.embed(["alpha beta", "gamma", "alpha"])
        assert len(vectors) == 3 and all(len(v) == 32 for v in vectors)
        assert vectors[0] != vectors[1]
        assert len(seen) == 3  # probe + two batches: the key is read per call
    finally:
        emb.close()


def test_awaited_and_blocking_clients_agree_in_order_and_batches(standin: StandInOpenAIServer) -> None:
    texts = ["alpha beta", "gamma", "alpha", "delta epsilon", "beta"]
    emb = _embedder(standin, batch_size=2)
    try:
        assert isinstance(emb, Embedder)  # the query path awaits aembed: no thread sent to wait on a socket
        blocking = emb.embed(texts)
        calls = standin.stats.embedding_calls
        awaited = asyncio.run(_aembed_once(emb, texts))
        assert standin.stats.embedding_calls - calls == 3  # batches of 2, 2 and 1
        assert awaited == blocking == [hash_vector(t, 64) for t in texts]
        # Usable again from another event loop (the API's lifespan, then the CLI).
        assert asyncio.run(_aembed_once(emb, ["gamma"])) == [hash_vector("gamma", 64)]
    finally:
        emb.close()


def test_awaited_client_reads_the_key_per_call(standin: StandInOpenAIServer) -> None:
    standin.config.api_keys = {"old-key", "new-key"}
    keys = iter(["old-key", "new-key"])
    emb = OpenAIEmbedder(
        base_url=standin.base_url, model="m", api_key=lambda: SecretStr(next(keys)), dimension=64, batch_size=1
    )
    try:
        asyncio.run(_aembed_once(emb, ["one", "two"]))
    finally:
        emb.close()
    assert standin.stats.auth_seen == ["old-key", "new-key"]


def test_embedder_errors_carry_status_only(standin: StandInOpenAIServer) -> None:
    emb = _embedder(standin)
    standin.config.api_keys = {"rotated"}
    try:
        with pytest.raises(EmbedderError) as blocking:
            emb.embed([f"text {CANARY}"])
        with pytest.raises(EmbedderError) as awaited:
            asyncio.run(_aembed_once(emb, [f"text {CANARY}"]))
    finally:
        emb.close()
    for info in (blocking, awaited):
        assert info.value.status == 401
        assert CANARY not in str(info.value)
        assert f"refused by the embedding server at {standin.base_url}" in str(info.value)


def _closed_port() -> int:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_an_embedder_error_naming_the_url_and_setting() -> None:
    port = _closed_port()
    emb = OpenAIEmbedder(
        base_url=f"http://user:pass@127.0.0.1:{port}/v1",
        model="m",
        api_key=lambda: None,
        dimension=8,
        timeout_s=2.0,
        url_setting="DOCQUERY_EMBEDDER__BASE_URL",
    )
    try:
        with pytest.raises(EmbedderUnreachable) as blocking:
            emb.embed([f"x {CANARY}"])
        with pytest.raises(EmbedderUnreachable) as awaited:
            asyncio.run(_aembed_once(emb, [f"x {CANARY}"]))
    finally:
        emb.close()
    for info in (blocking, awaited):
        message = str(info.value)
        assert f"no response from the embedding server at http://127.0.0.1:{port}/v1 (DOCQUERY_EMBEDDER__BASE_URL)" in (
            message
        )
        assert "check that the server is running" in message
        assert CANARY not in message and "pass" not in message


def test_an_embedder_built_from_settings_that_cannot_probe_names_the_setting(tmp_path: Path) -> None:
    # No dimension set: the first request (the dimension probe) is made while the embedder is built.
    settings = Settings(
        secrets_dir=tmp_path,
        embedder={"kind": "openai", "base_url": f"http://127.0.0.1:{_closed_port()}/v1", "timeout_s": 2},
    )
    with pytest.raises(EmbedderUnreachable, match=r"\(DOCQUERY_EMBEDDER__BASE_URL\): check that the server"):
        build_embedder(settings)


def test_proxy_variables_do_not_reroute_text(standin: StandInOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ingest sends document text and the query path sends questions; a proxy from the
    # environment would receive both. Neither client honours one.
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    emb = _embedder(standin)
    try:
        assert emb.embed(["alpha"]) == [hash_vector("alpha", 64)]
        assert asyncio.run(_aembed_once(emb, ["alpha"])) == [hash_vector("alpha", 64)]
    finally:
        emb.close()
    assert standin.stats.embedding_calls == 2


def test_oversized_response_is_refused_not_buffered(standin: StandInOpenAIServer) -> None:
    # batch_size=1 caps a response at 1 MiB + 256 KiB; a 400,000-dimension vector is over 1.2 MiB of JSON.
    emb = _embedder(standin, batch_size=1)
    standin.config.embedding_dim = 400_000
    try:
        for call in (lambda: emb.embed(["alpha"]), lambda: asyncio.run(_aembed_once(emb, ["alpha"]))):
            with pytest.raises(EmbedderError, match="too large"):
                call()
        standin.config.embedding_dim = 64
        assert emb.embed(["alpha"]) == [hash_vector("alpha", 64)]  # the client is still usable
    finally:
        emb.close()


@pytest.mark.parametrize(
    ("status", "retryable"), [(429, True), (500, True), (503, True), (401, False), (400, False), (404, False)]
)
def test_an_embedding_server_that_says_not_now_is_worth_a_retry(status: int, retryable: bool) -> None:
    from docquery.core.errors import EmbedderUnreachable
    from docquery.embedders.remote import _refused

    assert isinstance(_refused(status, "at http://e/v1 (S)"), EmbedderUnreachable) is retryable


def test_blocking_calls_from_several_threads_share_one_client(standin: StandInOpenAIServer) -> None:
    # Ingest embeds from worker threads: each call runs on the embedder's own loop, whoever calls it.
    from concurrent.futures import ThreadPoolExecutor

    emb = _embedder(standin)
    texts = [f"text {i}" for i in range(24)]
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda t: emb.embed([t]), texts))
        assert got == [[hash_vector(t, 64)] for t in texts]
        emb.close()
        assert emb.embed(["after close"]) == [hash_vector("after close", 64)]  # a closed embedder starts again
    finally:
        emb.close()
