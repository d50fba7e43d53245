"""Generator for vLLM (or any server) through the OpenAI-compatible chat API.

* Timeouts: connect, read (between bytes) and a total deadline per call.
* Bounded concurrency: a call beyond ``max_concurrency`` fails at once with
  ``GeneratorOverloaded`` (the API turns it into 503 + Retry-After) instead of
  queueing without limit.
* Retries only before the first token: after a token has reached the caller a
  retry would duplicate text, so later failures surface as errors.
* Errors never carry upstream bodies: they may echo the prompt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import httpx
from pydantic import SecretStr

from docquery.domain import Prompt
from docquery.errors import GeneratorError, GeneratorOverloaded, GeneratorUnavailable

KeyProvider = Callable[[], SecretStr | None]
_RETRYABLE = {429, 500, 502, 503, 504}


class OpenAIChatGenerator:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: KeyProvider,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 60.0,
        total_timeout_s: float = 120.0,
        max_concurrency: int = 16,
        max_retries: int = 2,
        max_tokens: int = 512,
        temperature: float = 0.1,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._model = model
        self._key = api_key
        self._total = total_timeout_s
        self._retries = max_retries
        self._params = {"max_tokens": max_tokens, "temperature": temperature}
        self._slots = max_concurrency
        self._in_flight = 0
        timeout = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s, write=10.0, pool=connect_timeout_s)
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/") + "/", timeout=timeout, transport=transport)

    @property
    def model(self) -> str:
        return self._model

    @property
    def mode(self) -> Literal["generative", "extractive"]:
        return "generative"

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def _acquire(self) -> None:
        # Single event loop: check-and-increment has no await in between, so it is atomic.
        if self._in_flight >= self._slots:
            raise GeneratorOverloaded("acquire slot", 503, retry_after=1.0)
        self._in_flight += 1

    def _release(self) -> None:
        self._in_flight -= 1

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return {"Authorization": f"Bearer {key.get_secret_value()}"} if key is not None else {}

    def _body(self, prompt: Prompt, stream: bool) -> dict[str, Any]:
        return {"model": self._model, "messages": list(prompt.messages), "stream": stream, **self._params}

    async def complete(self, prompt: Prompt) -> str:
        self._acquire()
        try:
            async with asyncio.timeout(self._total):
                resp = await self._send(prompt, stream=False)
                try:
                    data = resp.json()
                    return str(data["choices"][0]["message"]["content"] or "")
                except (ValueError, KeyError, IndexError, TypeError):
                    raise GeneratorError("parse completion", resp.status_code) from None
        except TimeoutError:
            raise GeneratorUnavailable("completion deadline") from None
        finally:
            self._release()

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        self._acquire()
        try:
            async with asyncio.timeout(self._total):
                async for delta in self._stream_once(prompt):
                    yield delta
        except TimeoutError:
            raise GeneratorUnavailable("stream deadline") from None
        finally:
            self._release()

    async def _send(self, prompt: Prompt, *, stream: bool) -> httpx.Response:
        """POST with retries; returns a 200 response (streaming responses left open)."""
        attempt = 0
        while True:
            try:
                request = self._client.build_request(
                    "POST", "chat/completions", json=self._body(prompt, stream), headers=self._headers()
                )
                resp = await self._client.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError):
                if attempt >= self._retries:
                    raise GeneratorUnavailable("chat request") from None
            else:
                if resp.status_code == 200:
                    return resp
                await resp.aclose()
                if resp.status_code not in _RETRYABLE or attempt >= self._retries:
                    raise _status_error(resp)
            attempt += 1
            await asyncio.sleep(min(0.2 * 2**attempt, 2.0))

    async def _stream_once(self, prompt: Prompt) -> AsyncIterator[str]:
        resp = await self._send(prompt, stream=True)
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                try:
                    event = json.loads(payload)
                except ValueError:
                    raise GeneratorError("parse stream event") from None
                if "error" in event:
                    raise GeneratorError("upstream stream error")
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield str(text)
        except httpx.HTTPError:
            # After the first token no retry: the caller already has partial text.
            raise GeneratorUnavailable("stream read") from None
        finally:
            await resp.aclose()

    async def ready(self) -> bool:
        try:
            resp = await self._client.get("models", headers=self._headers(), timeout=2.0)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    async def aclose(self) -> None:
        await self._client.aclose()


def _status_error(resp: httpx.Response) -> GeneratorError:
    retry_after = _retry_after(resp.headers.get("retry-after"))
    if resp.status_code in (429, 503):
        return GeneratorOverloaded("chat request", resp.status_code, retry_after=retry_after or 1.0)
    if resp.status_code >= 500:
        return GeneratorUnavailable("chat request", resp.status_code)
    return GeneratorError("chat request", resp.status_code)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
