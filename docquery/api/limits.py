"""Request limits: body size (413), per-principal rate limit (429), input bounds (422).

The body limit is enforced on the bytes actually received, chunk by chunk,
not on ``Content-Length`` alone: a chunked upload has no length, and a lying
length must not let a client stream megabytes into the JSON parser.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from docquery import validation
from docquery.api.errors import ApiError, envelope, request_id_of
from docquery.api.schemas import HistoryTurn
from docquery.config.settings import Settings
from docquery.rag.conversation import Turn

Clock = Callable[[], float]


class BodyLimitMiddleware:
    """Pure ASGI: reads the body up to ``max_bytes`` and replays it; beyond that, 413.

    ``streamed`` routes, (method, path) -> their own bound, read their bodies themselves as they arrive
    (uploads, into the spool): only a declared length past that bound is refused here, and nothing is held.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, streamed: Mapping[tuple[str, str], int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.streamed = dict(streamed or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        own_bound = self.streamed.get((scope["method"], scope["path"]))
        if own_bound is not None:
            declared = _content_length(scope)
            if declared == -1:
                await _send_error(scope, send, 400, "invalid Content-Length")
            elif declared is not None and declared > own_bound:
                await _send_error(scope, send, 413, "request body too large")
            else:
                await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _send_error(scope, send, 413, "request body too large")
            return
        if declared == -1:
            await _send_error(scope, send, 400, "invalid Content-Length")
            return
        messages: list[Message] = []
        total = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            total += len(message.get("body", b""))
            if total > self.max_bytes:
                await _send_error(scope, send, 413, "request body too large")
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                n = int(value)
            except ValueError:
                return -1
            return n if n >= 0 else -1
    return None


async def _send_error(scope: Scope, send: Send, status: int, message: str) -> None:
    ctx = (scope.get("state") or {}).get("ctx")
    if ctx is not None:
        ctx.outcome = "rejected"
    body = json.dumps(envelope(status, message, request_id_of(scope))).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RateLimiter:
    """Token bucket per principal: ``per_minute`` sustained, ``burst`` at once.

    Keyed by the verified principal id (after auth), so one caller cannot
    starve the others. Bounded memory: the least recently used buckets are
    dropped beyond ``max_keys`` (a dropped bucket restarts full, which only
    ever errs towards admitting).
    """

    def __init__(self, per_minute: int, burst: int, *, clock: Clock = time.monotonic, max_keys: int = 100_000) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, key: str) -> float | None:
        """Like :meth:`take` without spending: None when a token is available."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        return None if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def take(self, key: str) -> float | None:
        """Spend one token. None when admitted, else seconds until a token is available."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.pop(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - last) * self._rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                wait = None
            else:
                self._buckets[key] = (tokens, now)
                wait = (1.0 - tokens) / self._rate
            while len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
        return wait


class AuthFailureLimiter:
    """Failed authentications per client address (a token bucket each, bounded like RateLimiter).

    Checked before a credential is verified: an address past its budget gets 429
    whatever it presents, so the answer says nothing about whether a credential
    exists, and guessing runs at ``per_minute`` at most.
    """

    def __init__(self, per_minute: int, burst: int, *, clock: Clock = time.monotonic, max_keys: int = 100_000) -> None:
        self._buckets = RateLimiter(per_minute, burst, clock=clock, max_keys=max_keys)

    def blocked(self, address: str) -> float | None:
        """Seconds until ``address`` may try again, or None when it may try now."""
        return self._buckets.peek(address)

    def failed(self, address: str) -> None:
        self._buckets.take(address)


def rate_limited(wait_s: float) -> ApiError:
    return ApiError(429, "rate limit exceeded", headers={"Retry-After": str(max(1, math.ceil(wait_s)))})


def _unprocessable(exc: validation.InvalidRequest) -> ApiError:
    return ApiError(422, f"invalid request: {exc.field}: {exc.reason}")


def check_question(text: str, settings: Settings, field: str = "question") -> str:
    """The question/query bounds (docquery.validation); 422 names the field and the bound, never the value."""
    try:
        return validation.question(text, settings, field)
    except validation.InvalidRequest as exc:
        raise _unprocessable(exc) from None


def check_history(turns: Sequence[HistoryTurn], settings: Settings) -> list[Turn]:
    """/v1/query's history bounds (turns, then characters); 422 names the bound, never the text."""
    cfg = settings.conversation
    if len(turns) > cfg.max_history_turns:
        raise ApiError(422, f"invalid request: history: more than {cfg.max_history_turns} turns")
    if sum(len(t.content) for t in turns) > cfg.max_history_chars:
        raise ApiError(422, f"invalid request: history: longer than {cfg.max_history_chars} characters in all")
    return [Turn(t.role, t.content) for t in turns]


def check_top_k(top_k: int | None, settings: Settings, default: int | None = None) -> int:
    try:
        return validation.top_k(top_k, settings, default=default)
    except validation.InvalidRequest as exc:
        raise _unprocessable(exc) from None
