"""Server-sent events and the stream "priming" that keeps early errors proper HTTP errors.

A stream is primed before the response starts: retrieval runs and the
generator is pulled until its first delta. Anything that fails by then
(overload, LLM down, retries exhausted) becomes a normal error response with
the right status and ``Retry-After``. After the first byte, failures are sent
as an ``error`` event with the same envelope.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from docquery.rag.pipeline import StreamEvent


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def sse_data(data: Any) -> bytes:
    """OpenAI-style: data-only lines."""
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def prime(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    """Pull events up to and including the first one that is not ``citations``."""
    head: list[StreamEvent] = []
    try:
        while True:
            ev = await anext(events)
            head.append(ev)
            if ev.event != "citations":
                return head
    except StopAsyncIteration:
        return head
    except BaseException:
        await _aclose(events)
        raise


async def _aclose(events: AsyncIterator[StreamEvent]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
