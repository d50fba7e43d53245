"""Remote embedder for an OpenAI-compatible ``/v1/embeddings`` (vLLM, TEI, ...).

One HTTP library, aiohttp, as the LLM client: httpx's async pool cost ~8 ms of CPU per call at 32
concurrent calls, aiohttp's 0.3 ms (docs/design.md). ``aembed`` runs
on the caller's event loop, so the query path awaits the question's embedding instead of sending a
thread to wait on a socket (``rag.pipeline``); ``embed``, called from ingest's worker threads, runs the
same request on an event loop of the embedder's own thread, which keeps its connections between calls.
The API key is read through a callable on every call, so a rotated Vault-rendered file takes effect
without a restart. Errors carry a status code and where the server is (URL and setting) at most, never
the upstream body or the request's: either may hold the text.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import aiohttp

from docquery.core.errors import EmbedderError, EmbedderUnreachable
from docquery.core.ports import KeyProvider
from docquery.core.urls import public_url
from docquery.runtime.loop_session import LoopSession

# A response is refused past this many bytes per input text: 256 KiB holds a vector of about
# 10,000 dimensions as JSON. A larger body is an upstream fault, not a reason to run out of memory.
_BYTES_PER_INPUT = 256 * 1024
_T = TypeVar("_T")


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
        url_setting: str = "the embedder's base URL",
    ) -> None:
        """``url_setting`` names where ``base_url`` came from, for the message when the server does not answer."""
        self._model = model
        self._where = _where(base_url, url_setting)
        self._key = api_key
        self._batch = batch_size
        self._max_bytes = 1024 * 1024 + batch_size * _BYTES_PER_INPUT
        # trust_env is off in LoopSession: a proxy variable must not receive document text or questions.
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._async = LoopSession(base_url=base_url, timeout=timeout, limit=64)
        self._blocking = _LoopThread(LoopSession(base_url=base_url, timeout=timeout, limit=64))
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
        return self._blocking.run(self._acall(batch, self._blocking.session))

    async def _acall(self, batch: list[str], session: LoopSession | None = None) -> list[list[float]]:
        client = (session or self._async).get()
        try:
            async with client.post("embeddings", json=self._body(batch), headers=self._headers()) as resp:
                if resp.status != 200:
                    raise _refused(resp.status, self._where)
                body = _Capped(self._max_bytes)
                async for part in resp.content.iter_any():  # decoded: the cap bounds what is held
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
        self._blocking.close()

    async def aclose(self) -> None:
        """Release the query path's connection pool of the current event loop."""
        await self._async.aclose()


class _LoopThread:
    """An event loop on a daemon thread, started on the first blocking call, for callers that have none.

    Any thread may submit to it (ingest embeds from several); its session lives on that loop only.
    """

    def __init__(self, session: LoopSession) -> None:
        self.session = session
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="embedder-http", daemon=True)
                self._thread.start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.session.aclose(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


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
