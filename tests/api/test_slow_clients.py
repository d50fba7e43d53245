"""Slow and idle clients against the real app served by uvicorn with ``docquery serve``'s options.

Raw sockets on loopback: idle, slow-head and slow-body connections are cut at
their bounds, a request head over the size bound is refused however it arrives,
the number of connections stays bounded, and a normal client is served throughout.
Protocol-level errors come back in the JSON error envelope.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from docquery.api.limits import AuthFailureLimiter
from docquery.api.server import server_options
from docquery.config.settings import ApiSettings
from tests.support.api_harness import Harness

# Every test here runs a real server and measures its timeouts on the wall clock.
pytestmark = pytest.mark.slow

LIMITS = ApiSettings(
    head_timeout_s=0.6, body_timeout_s=0.6, keepalive_timeout_s=0.6, max_connections=24, max_head_bytes=4096
)
KEY = "tok-alice-eng"


@dataclass
class Served:
    port: int
    server: uvicorn.Server

    def connections(self) -> int:
        return len(self.server.server_state.connections)


@contextmanager
def _serve(app: Any, limits: ApiSettings) -> Iterator[Served]:
    """``app`` (an ASGI app) served as ``docquery serve`` serves, on a free loopback port, in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", **server_options("critical", limits))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield Served(sock.getsockname()[1], server)
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


@pytest.fixture(scope="module")
def served(shared_harness: Harness) -> Iterator[Served]:
    shared_harness.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
    with _serve(shared_harness.app, LIMITS) as s:
        yield s


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _read_all(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything until the server closes the connection (fails if it does not within ``timeout``)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        part = sock.recv(65536)
        if not part:
            return data
        data += part


def _status_and_body(raw: bytes) -> tuple[int, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _normal_request(port: int) -> int:
    body = json.dumps({"query": "vacation days"}).encode()
    with _connect(port) as sock:
        sock.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )
        status, payload = _status_and_body(_read_all(sock))
        assert status != 200 or json.loads(payload)["citations"]
        return status


def _assert_envelope(raw: bytes, status: int) -> None:
    got, body = _status_and_body(raw)
    assert got == status, raw[:200]
    error = json.loads(body)["error"]
    assert set(error) == {"type", "message", "request_id"} and error["request_id"]


def test_idle_connections_are_closed_and_a_normal_client_is_served(served: Served) -> None:
    idle = [_connect(served.port) for _ in range(10)]
    try:
        assert _normal_request(served.port) == 200
        t0 = time.monotonic()
        for sock in idle:
            assert _read_all(sock) == b""  # closed without a word: it never asked for anything
        assert time.monotonic() - t0 < LIMITS.keepalive_timeout_s + 2
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.parametrize("interval", [0.05, 0.2])
def test_a_slow_head_gets_408_at_its_bound(served: Served, interval: float) -> None:
    with _connect(served.port) as sock:
        t0 = time.monotonic()
        head = b"POST /v1/search HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 200
        raw = b""
        sock.settimeout(0.01)
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
                raw += sock.recv(65536)
            except TimeoutError:
                pass
            except OSError:
                break
            if raw or time.monotonic() - t0 > 5:
                break
            time.sleep(interval)
        raw += _read_all(sock)
        _assert_envelope(raw, 408)
        assert time.monotonic() - t0 < LIMITS.head_timeout_s + 2


def test_a_slow_body_gets_408_at_its_bound(served: Served) -> None:
    with _connect(served.port) as sock:
        t0 = time.monotonic()
        sock.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        raw = _read_all(sock)
        _assert_envelope(raw, 408)
        assert time.monotonic() - t0 < LIMITS.body_timeout_s + 2
    assert _normal_request(served.port) == 200


@pytest.mark.parametrize("size", [100_000, 5000, LIMITS.max_head_bytes + 1])
@pytest.mark.parametrize("writes", ["one write", "many writes"])
def test_a_head_over_the_bound_is_refused_however_it_arrives(served: Served, size: int, writes: str) -> None:
    head = b"GET /v1/documents HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * size + b"\r\n\r\n"
    with _connect(served.port) as sock:
        try:
            if writes == "one write":
                sock.sendall(head)
            else:
                for i in range(0, len(head), 1000):
                    sock.sendall(head[i : i + 1000])
        except OSError:
            pass  # the server closed before the last part
        # Closing on unread client data resets the connection, which may discard the 431 before the
        # client reads it (either way of writing, on a loaded machine): refused all the same, since a
        # head the server accepted would get its answer (401 here) on an open connection.
        with contextlib.suppress(ConnectionResetError):
            _assert_envelope(_read_all(sock), 431)
    assert _normal_request(served.port) == 200


def test_a_head_within_the_bound_is_served(served: Served) -> None:
    pad = b"a" * (LIMITS.max_head_bytes - 400)
    with _connect(served.port) as sock:
        sock.sendall(
            b"GET /v1/documents HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n"
            b"Connection: close\r\nX-Pad: " + pad + b"\r\n\r\n"
        )
        status, _ = _status_and_body(_read_all(sock))
        assert status == 200


def test_connections_stay_bounded_and_idle_ones_make_room(served: Served) -> None:
    extra = [_connect(served.port) for _ in range(LIMITS.max_connections + 20)]
    try:
        time.sleep(0.2)
        assert served.connections() <= LIMITS.max_connections
        assert _normal_request(served.port) == 200
    finally:
        for sock in extra:
            sock.close()


def test_when_every_connection_is_busy_a_new_one_gets_503(served: Served, shared_harness: Harness) -> None:
    # Its own server with a long body bound: the busy connections must stay busy while the test runs.
    limits = LIMITS.model_copy(update={"body_timeout_s": 30.0, "max_connections": 8})
    with _serve(shared_harness.app, limits) as busy_server:
        busy = []
        try:
            # Authenticated connections mid-body are requests in progress: never evicted for a newcomer.
            for _ in range(limits.max_connections):
                sock = _connect(busy_server.port)
                sock.sendall(_head(b"/v1/search", 100, KEY) + b"{")
                busy.append(sock)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not _all_mid_body(busy_server, limits.max_connections):
                time.sleep(0.02)
            with _connect(busy_server.port) as sock:
                _assert_envelope(_read_all(sock), 503)
        finally:
            for sock in busy:
                sock.close()
        deadline = time.monotonic() + 5
        while busy_server.connections() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _normal_request(busy_server.port) == 200


def _head(path: bytes, length: int, key: str | None) -> bytes:
    auth = b"Authorization: Bearer " + key.encode() + b"\r\n" if key is not None else b""
    return b"POST " + path + b" HTTP/1.1\r\nHost: t\r\n" + auth + b"Content-Length: %d\r\n\r\n" % length


@pytest.mark.parametrize("key", [None, "tok-guess", "Basic dXNlcjpwYXNz"])
@pytest.mark.parametrize("path", [b"/v1/query", b"/v1/search", b"/v1/chat/completions", b"/v1/nowhere"])
def test_a_body_without_a_valid_credential_is_refused_before_it_is_read(
    served: Served, shared_harness: Harness, key: str | None, path: bytes
) -> None:
    # A client that may not call the API cannot hold a connection by trickling a body: the head is
    # answered at once (401, connection closed), every connection slot of a full server included.
    limits = LIMITS.model_copy(update={"body_timeout_s": 30.0, "max_connections": 8})
    shared_harness.app.state.auth_failures = AuthFailureLimiter(10_000, 10_000)  # 401s here, not 429s
    with _serve(shared_harness.app, limits) as server:
        socks = []
        try:
            t0 = time.monotonic()
            for _ in range(limits.max_connections * 2):  # more than fit: each is gone before the next
                sock = _connect(server.port)
                socks.append(sock)
                sock.sendall(_head(path, 60_000, key))  # the body would follow, slowly; it is never asked for
                _assert_envelope(_read_all(sock, timeout=5), 401)
            assert time.monotonic() - t0 < 10  # not the 30 s body bound
            assert _normal_request(server.port) == 200
        finally:
            for sock in socks:
                sock.close()


def _all_mid_body(served: Served, n: int) -> bool:
    conns = list(served.server.server_state.connections)
    return len(conns) == n and all(getattr(c, "_phase", None) == "body" for c in conns)


@pytest.mark.parametrize(
    "request_line",
    [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        b"GET /\x00 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01",
    ],
)
def test_an_invalid_request_gets_the_error_envelope(served: Served, request_line: bytes) -> None:
    with _connect(served.port) as sock:
        sock.sendall(request_line + (b"\r\n\r\n" if request_line.startswith(b"\x16") else b""))
        raw = _read_all(sock)
        _assert_envelope(raw, 400)
        assert b"content-type: application/json" in raw.lower()


def test_a_keep_alive_connection_is_closed_when_idle(served: Served) -> None:
    with _connect(served.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        t0 = time.monotonic()
        raw = _read_all(sock)
        assert raw.startswith(b"HTTP/1.1 200")
        assert LIMITS.keepalive_timeout_s - 0.2 < time.monotonic() - t0 < LIMITS.keepalive_timeout_s + 2


def test_a_client_that_stops_reading_a_response_is_cut_off() -> None:
    # A stream whose reader stalls would otherwise hold what it holds (its LLM slot) for as long as the
    # client likes. An endless response, served with `docquery serve`'s protocol, to a client that reads
    # nothing: the connection is aborted once the send buffer has been full for send_timeout_s.
    ended = threading.Event()

    async def endless(scope: dict[str, object], receive: Any, send: Any) -> None:
        gone = asyncio.Event()

        async def watch() -> None:  # as Starlette's StreamingResponse listens for the disconnect
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.ensure_future(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            while not gone.is_set():
                await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
        finally:
            watcher.cancel()
            ended.set()  # what a stream's finally does: give its LLM slot back

    limits = LIMITS.model_copy(update={"send_timeout_s": 0.5})
    with _serve(endless, limits) as served:
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", served.port))
        client.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        assert ended.wait(timeout=20), "the response never ended"
        assert not served.connections()
        client.close()
