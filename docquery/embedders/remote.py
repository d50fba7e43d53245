"""Remote embedder for an OpenAI-compatible ``/v1/embeddings`` (vLLM, TEI, ...).

Two clients over the same protocol: ``embed`` (httpx, blocking) for ingest, which
embeds from worker threads, and ``aembed`` (aiohttp) for the query path, which
awaits the question's embedding on the event loop instead of sending a thread to
wait on a socket (``rag.pipeline``). The API key is read through a callable on
every call, so a rotated Vault-rendered file takes effect without a restart.
Errors carry a status code and where the server is (URL and setting) at most, never the
upstream body or the request's: either may hold the text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aiohttp
import httpx

from docquery.core.errors import EmbedderError, EmbedderUnreachable
from docquery.core.ports import KeyProvider
from docquery.core.urls import public_url
from docquery.runtime.loop_session import LoopSession

# A response is refused past this many bytes per input text: 256 KiB holds a vector of about
# 10,000 dimensions as JSON. A larger body is an upstream fault, not a reason to run out of memory.
_BYTES_PER_INPUT = 256 * 1024


class OpenAIEmbedder:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: KeyProvider,
        dimension: int | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        url_setting: str = "the embedder's base URL",
    ) -> None:
        """``url_setting`` names where ``base_url`` came from, for the message when the server does not answer."""
        self._model = model
        self._where = _where(base_url, url_setting)
        self._key = api_key
        self._batch = batch_size
        self._max_bytes = 1024 * 1024 + batch_size * _BYTES_PER_INPUT
        # trust_env off, as in loop_session: a proxy variable must not receive document text.
        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/", timeout=timeout_s, transport=transport, trust_env=False
        )
        self._async = LoopSession(base_url=base_url, timeout=aiohttp.ClientTimeout(total=timeout_s), limit=64)
        self._dimension = dimension if dimension is not None else len(self._call(["dimension probe"])[0])

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch):
            out.extend(self._call(list(texts[i : i + self._batch])))
        return out

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch):
            out.extend(await self._acall(list(texts[i : i + self._batch])))
        return out

    def _call(self, batch: list[str]) -> list[list[float]]:
        try:
            with self._client.stream("POST", "embeddings", json=self._body(batch), headers=self._headers()) as resp:
                if resp.status_code != 200:
                    raise _refused(resp.status_code, self._where)
                body = _Capped(self._max_bytes)
                for part in resp.iter_bytes():  # decoded: the cap bounds what is held
                    body.add(part)
        except httpx.HTTPError:
            raise self._unreachable() from None
        return _vectors(body.value(), len(batch))

    async def _acall(self, batch: list[str]) -> list[list[float]]:
        try:
            async with self._async.get().post("embeddings", json=self._body(batch), headers=self._headers()) as resp:
                if resp.status != 200:
                    raise _refused(resp.status, self._where)
                body = _Capped(self._max_bytes)
                async for part in resp.content.iter_any():
                    body.add(part)
        except (aiohttp.ClientError, TimeoutError):
            raise self._unreachable() from None
        return _vectors(body.value(), len(batch))

    def _unreachable(self) -> EmbedderUnreachable:
        # Built from the settings alone: the library's message may quote the request, which holds the text.
        return EmbedderUnreachable(
            "embeddings request",
            detail=f"no response from the embedding server {self._where}: check that the server is running and "
            "reachable from here, and that the URL is its OpenAI-compatible base, e.g. http://tei:8080/v1",
        )

    def _body(self, batch: list[str]) -> dict[str, Any]:
        return {"model": self._model, "input": batch}

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return {"Authorization": f"Bearer {key.get_secret_value()}"} if key is not None else {}

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        """Release the query path's connection pool of the current event loop."""
        await self._async.aclose()


class _Capped:
    """Collects a response body and refuses it past ``limit`` bytes, before buffering more."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, part: bytes) -> None:
        self._size += len(part)
        if self._size > self._limit:
            raise EmbedderError("embeddings response too large")
        self._parts.append(part)

    def value(self) -> bytes:
        return b"".join(self._parts)


def _vectors(raw: bytes, expected: int) -> list[list[float]]:
    try:
        data = sorted(json.loads(raw)["data"], key=lambda d: d["index"])
        vectors = [[float(x) for x in d["embedding"]] for d in data]
    except (ValueError, KeyError, TypeError):
        raise EmbedderError("embeddings response") from None
    if len(vectors) != expected:
        raise EmbedderError("embeddings response")
    return vectors


def _where(base_url: str, setting: str) -> str:
    shown = public_url(base_url)  # no userinfo or query string: they may carry a key
    return f"at {shown} ({setting})" if shown else f"({setting} is not a URL)"


def _refused(status: int, where: str) -> EmbedderError:
    """429 and 5xx say "not now" (a retry may succeed); any other status will not change."""
    if status == 429 or status >= 500:
        return EmbedderUnreachable("embeddings request", status, f"the embedding server {where} cannot answer now")
    return EmbedderError("embeddings request", status, f"refused by the embedding server {where}")
