"""Generator for vLLM (or any server) through the OpenAI-compatible chat API.

* Timeouts: connect, read (between bytes) and a total deadline per call.
* Bounded concurrency: a call beyond ``max_concurrency`` fails at once with
  ``GeneratorOverloaded`` (the API turns it into 503 + Retry-After) instead of
  queueing without limit.
* Retries only before the first token: after a token has reached the caller a
  retry would duplicate text, so later failures surface as errors.
* Errors never carry upstream bodies: they may echo the prompt.

The HTTP client is aiohttp, not httpx: httpx's async connection pool rescans every
pooled connection on each request, which cost the service CPU at 32 concurrent calls
(docs/design.md). The session is per event
loop and ignores proxy variables (``runtime.loop_session.LoopSession``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

import aiohttp

from docquery.core.domain import FINISH_REASONS, FinishReason, Prompt, TokenMeter
from docquery.core.errors import GeneratorError, GeneratorOverloaded, GeneratorUnavailable
from docquery.core.ports import KeyProvider
from docquery.runtime.loop_session import LoopSession

_RETRYABLE = {429, 500, 502, 503, 504}
# A completion of max_tokens is a few KiB of JSON; a body beyond this is an upstream fault.
_MAX_COMPLETION_BYTES = 4 * 1024 * 1024


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
    ) -> None:
        self._model = model
        self._key = api_key
        self._total = total_timeout_s
        self._retries = max_retries
        self._params = {"max_tokens": max_tokens, "temperature": temperature}
        self._slots = max_concurrency
        self._in_flight = 0
        self._http = LoopSession(
            base_url=base_url,
            # No total here: the deadline is asyncio.timeout(total_timeout_s) around the whole call.
            timeout=aiohttp.ClientTimeout(
                total=None, connect=connect_timeout_s, sock_connect=connect_timeout_s, sock_read=read_timeout_s
            ),
            # Calls beyond max_concurrency are refused before they get here; +2 for readiness probes.
            limit=max_concurrency + 2,
        )

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
        body = {"model": self._model, "messages": list(prompt.messages), "stream": stream, **self._params}
        if stream:  # the server's own token counts, as a last chunk (vLLM and OpenAI both honour it)
            body["stream_options"] = {"include_usage": True}
        return body

    async def complete(self, prompt: Prompt) -> str:
        return (await self.complete_finish(prompt))[0]

    async def complete_finish(
        self, prompt: Prompt, *, meter: TokenMeter | None = None
    ) -> tuple[str, FinishReason | None]:
        """The completion and why the LLM stopped (``"length"``: truncated at max_tokens);
        the server's token counts go to ``meter``."""
        self._acquire()
        try:
            async with asyncio.timeout(self._total):
                resp = await self._send(prompt, stream=False)
                try:
                    data = json.loads(await _read_capped(resp, _MAX_COMPLETION_BYTES))
                    choice = data["choices"][0]
                    if meter is not None:
                        meter.add(data.get("usage"))
                    return str(choice["message"]["content"] or ""), _finish(choice.get("finish_reason"))
                except aiohttp.ClientError:
                    raise GeneratorUnavailable("completion read") from None
                except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                    raise GeneratorError("parse completion", resp.status) from None
                finally:
                    resp.release()
        except TimeoutError:
            raise GeneratorUnavailable("completion deadline") from None
        finally:
            self._release()

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        async for delta, _ in self.stream_finish(prompt):
            if delta:
                yield delta

    async def stream_finish(
        self, prompt: Prompt, *, meter: TokenMeter | None = None
    ) -> AsyncIterator[tuple[str, FinishReason | None]]:
        """Deltas as ``(text, None)``; the chunk that carries the finish reason as ``("", reason)``."""
        self._acquire()
        try:
            async with asyncio.timeout(self._total):
                async for delta in self._stream_once(prompt, meter):
                    yield delta
        except TimeoutError:
            raise GeneratorUnavailable("stream deadline") from None
        finally:
            self._release()

    async def _send(self, prompt: Prompt, *, stream: bool) -> aiohttp.ClientResponse:
        """POST with retries; returns a 200 response with its body unread (the caller releases it)."""
        attempt = 0
        body = json.dumps(self._body(prompt, stream)).encode()
        while True:
            headers = {"Content-Type": "application/json", **self._headers()}
            try:
                resp = await self._http.get().post("chat/completions", data=body, headers=headers)
            except aiohttp.ClientConnectionError:  # refused, reset, connect or read timeout
                if attempt >= self._retries:
                    raise GeneratorUnavailable("chat request") from None
            except aiohttp.ClientError:
                raise GeneratorUnavailable("chat request") from None
            else:
                if resp.status == 200:
                    return resp
                resp.release()  # the body is never read: it may echo the prompt
                if resp.status not in _RETRYABLE or attempt >= self._retries:
                    raise _status_error(resp)
            attempt += 1
            await asyncio.sleep(min(0.2 * 2**attempt, 2.0))

    async def _stream_once(
        self, prompt: Prompt, meter: TokenMeter | None
    ) -> AsyncIterator[tuple[str, FinishReason | None]]:
        resp = await self._send(prompt, stream=True)
        try:
            async for raw in resp.content:
                line = raw.decode("utf-8", errors="replace")
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    # Read the body's terminator so the connection is reused; anything more than a
                    # little is not read (release() then closes the connection instead).
                    await _read_capped(resp, 64 * 1024, fail=False)
                    return
                try:
                    event = json.loads(payload)
                except ValueError:
                    raise GeneratorError("parse stream event") from None
                if "error" in event:
                    raise GeneratorError("upstream stream error")
                if meter is not None and event.get("usage"):
                    meter.add(event["usage"])
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield str(text), None
                    reason = _finish(choice.get("finish_reason"))
                    if reason is not None:
                        yield "", reason
        except (aiohttp.ClientError, ValueError):
            # ValueError: an over-long line. After the first token no retry: the caller
            # already has partial text.
            raise GeneratorUnavailable("stream read") from None
        finally:
            resp.release()

    async def ready(self) -> bool:
        try:
            async with self._http.get().get(
                "models", headers=self._headers(), timeout=aiohttp.ClientTimeout(total=2.0)
            ) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def aclose(self) -> None:
        """Release the connection pool of the current event loop (reopened on the next call)."""
        await self._http.aclose()


async def _read_capped(resp: aiohttp.ClientResponse, limit: int, *, fail: bool = True) -> bytes:
    """The rest of the body, at most ``limit`` bytes: past it, ``GeneratorError`` (or a short read)."""
    parts: list[bytes] = []
    size = 0
    while not resp.content.at_eof():
        part = await resp.content.readany()
        size += len(part)
        if size > limit:
            if fail:
                raise GeneratorError("completion too large", resp.status)
            break
        parts.append(part)
    return b"".join(parts)


def _finish(value: Any) -> FinishReason | None:
    # Only the values OpenAI defines reach the caller: the server's string is untrusted.
    return value if isinstance(value, str) and value in FINISH_REASONS else None  # type: ignore[return-value]


def _status_error(resp: aiohttp.ClientResponse) -> GeneratorError:
    retry_after = _retry_after(resp.headers.get("Retry-After"))
    if resp.status in (429, 503):
        return GeneratorOverloaded("chat request", resp.status, retry_after=retry_after or 1.0)
    if resp.status >= 500:
        return GeneratorUnavailable("chat request", resp.status)
    return GeneratorError("chat request", resp.status)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
