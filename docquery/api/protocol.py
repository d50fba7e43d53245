"""uvicorn's h11 protocol with the connection limits it lacks (slow clients, slowloris).

uvicorn bounds neither the time a client takes to send a request head or body
nor the number of open connections, and h11 bounds the size of a request head
only while it is incomplete: a 100 KB head in one write is accepted. Here, per
connection:

* **idle**: a connection with no request in progress (new, or between
  keep-alive requests) is closed after ``keepalive_timeout_s``;
* **head**: from its first byte the request head must be complete within
  ``head_timeout_s``, or the connection gets 408 and is closed;
* **body**: the body must be complete within ``body_timeout_s`` of the head,
  or 408 (when no response has started) and close;
* **send**: a response whose client stops reading it (the transport's buffer
  past its high-water mark) for ``send_timeout_s`` is cut (the connection is
  aborted), so a stream cannot hold its LLM slot for as long as a client likes;
* **head size**: a head larger than ``max_head_bytes`` gets 431 however it
  arrived (h11 is also told the bound for incomplete heads);
* **connections**: past ``max_connections``, the longest-idle connection with
  no request in progress is closed to make room; when every connection is
  busy, the new one gets 503 and is closed.

Errors the protocol layer answers itself (these, and h11's "Invalid HTTP
request received.") use the API's JSON error envelope.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from docquery.api.context import new_request_id
from docquery.api.errors import envelope

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}
_MESSAGES = {
    400: "invalid HTTP request",
    408: "the request was not received in time",
    431: "request head too large",
    503: "too many connections; retry later",
}


@dataclass(frozen=True)
class ConnectionLimits:
    head_timeout_s: float
    body_timeout_s: float
    keepalive_timeout_s: float
    send_timeout_s: float
    max_connections: int
    max_head_bytes: int


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """A protocol class bound to ``limits`` (uvicorn instantiates it per connection)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})


class _HeadBoundConnection(h11.Connection):
    """h11, refusing a complete request head above the bound (h11 checks only incomplete ones)."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self._max_head = max_head_bytes

        self.refused_status = 400

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            # h11 says "Receive buffer too long" for an incomplete head past the bound.
            self.refused_status = 431 if "too long" in str(exc) else 400
            raise
        if isinstance(event, h11.Request) and _head_size(event) > self._max_head:
            self.refused_status = 431
            raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return event


def _head_size(event: h11.Request) -> int:
    # The bytes of the head without optional whitespace: never more than what was sent.
    size = len(event.method) + len(event.target) + 12
    return size + sum(len(name) + len(value) + 4 for name, value in event.headers.raw_items())


class GuardedH11Protocol(H11Protocol):
    limits: ClassVar[ConnectionLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _HeadBoundConnection(self.limits.max_head_bytes)
        self._deadline: asyncio.TimerHandle | None = None
        self._stall: asyncio.TimerHandle | None = None  # armed while the client is not reading
        self._phase = "idle"  # idle | head | body | app
        self._idle_since = time.monotonic()

    # -- connection count ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._evict_idle():
            self._refuse(503, close_only=False)
            return
        self._arm(self.limits.keepalive_timeout_s)

    def _evict_idle(self) -> bool:
        idle = [
            c
            for c in self.connections
            if c is not self and isinstance(c, GuardedH11Protocol) and c._phase in ("idle", "head")
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._idle_since)
        oldest._close()
        return True

    # -- time bounds ---------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._phase == "idle":
            self._phase = "head"
            self._arm(self.limits.head_timeout_s)
        super().data_received(data)
        self._track()

    def on_response_complete(self) -> None:
        # Idle again; uvicorn arms its keep-alive timer (timeout_keep_alive = keepalive_timeout_s)
        # and may go on with a pipelined request, hence the _track after it.
        self._cancel()
        self._phase = "idle"
        self._idle_since = time.monotonic()
        super().on_response_complete()
        self._track()

    def _track(self) -> None:
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._phase = "body"
                self._arm(self.limits.body_timeout_s)
        elif state is h11.DONE and self.cycle is not None and not self.cycle.response_complete:
            self._phase = "app"
            self._cancel()

    def _arm(self, seconds: float) -> None:
        self._cancel()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "idle":
            self._close()
        elif self._phase in ("head", "body"):
            started = self.cycle is not None and self.cycle.response_started
            self._refuse(408, close_only=started)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self._cancel_stall()
        super().connection_lost(exc)

    # -- a client that stops reading -----------------------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._cancel_stall()
        self._stall = self.loop.call_later(self.limits.send_timeout_s, self._stalled)

    def resume_writing(self) -> None:
        self._cancel_stall()
        super().resume_writing()

    def _cancel_stall(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _stalled(self) -> None:
        self._stall = None
        self._phase = "closed"
        self.transport.abort()  # not close(), even if one is pending: it waits for the buffer to drain

    # -- answers from the protocol layer -------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        # h11's "Invalid HTTP request received." and the head bound (431): the JSON envelope.
        status = self.conn.refused_status if isinstance(self.conn, _HeadBoundConnection) else 400
        self._refuse(status, close_only=False)

    def _refuse(self, status: int, *, close_only: bool) -> None:
        self._cancel()
        self._phase = "closed"
        status = status if status in _MESSAGES else 400
        if not close_only and not self.transport.is_closing():
            rid = new_request_id()
            body = json.dumps(envelope(status, _MESSAGES[status], rid)).encode()
            head = (
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"x-request-id: %s\r\nconnection: close\r\n\r\n"
            ) % (status, _REASONS[status], len(body), rid.encode())
            self.transport.write(head + body)
        self._close()

    def _close(self) -> None:
        self._cancel()
        self._phase = "closed"
        if not self.transport.is_closing():
            self.transport.close()
