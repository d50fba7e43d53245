"""The app over a real socket with ``docquery serve``'s uvicorn options (h11, no WebSockets).

Raw HTTP/1.1 on keep-alive connections: answers, streams, limits and parser
errors arrive whole and in order, and an oversized request head is refused.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from docquery.api.server import server_options
from tests.support.api_harness import Harness

KEY = "tok-alice-eng"


@dataclass
class Served:
    port: int
    server: uvicorn.Server


@pytest.fixture(scope="module")
def served(shared_harness: Harness) -> Iterator[Served]:
    shared_harness.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(shared_harness.app, lifespan="off", **server_options("critical"))
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


def _request(path: str, body: bytes, *, headers: str = "", method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    ).encode() + body


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        if fields.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._more()
                size_line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(size_line, 16)
                while len(self.buf) < size + 2:
                    self._more()
                body, self.buf = body + self.buf[:size], self.buf[size + 2 :]
                if size == 0:
                    return int(lines[0].split()[1]), fields, body
        length = int(fields.get("content-length", "0"))
        while len(self.buf) < length:
            self._more()
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), fields, body

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.buf += data

    def close(self) -> None:
        self.sock.close()


def test_answers_streams_and_errors_in_order_on_one_connection(served: Served) -> None:
    conn = Conn(served.port)
    try:
        q = json.dumps({"question": "how many vacation days of paid leave"}).encode()
        conn.sock.sendall(_request("/v1/query", q))
        status, fields, body = conn.response()
        connections = served.server.server_state.connections
        assert connections and all(isinstance(p, H11Protocol) for p in connections)
        assert status == 200 and fields["content-type"] == "application/json"
        assert json.loads(body)["citations"][0]["doc_id"] == "vac"
        assert fields["cache-control"] == "no-store" and fields["x-request-id"]

        search = json.dumps({"query": "vacation days of paid leave"}).encode()
        # Pipelined: three requests in one send, answered in order on the same connection.
        stream = json.dumps({"question": "how many vacation days of paid leave", "stream": True}).encode()
        conn.sock.sendall(
            _request("/v1/query", stream) + _request("/v1/query", b"{not json") + _request("/v1/search", search)
        )
        status, fields, body = conn.response()
        assert status == 200 and fields["content-type"].startswith("text/event-stream")
        events = [block.split("\n", 1)[0] for block in body.decode().strip().split("\n\n")]
        assert events[0] == "event: citations" and events[-1] == "event: done"
        status, _, body = conn.response()
        assert status == 422 and json.loads(body)["error"]["request_id"]
        status, _, body = conn.response()
        assert status == 200 and json.loads(body)["citations"]
    finally:
        conn.close()


def test_oversized_body_is_refused_and_a_bad_request_line_gets_400(served: Served) -> None:
    conn = Conn(served.port)
    try:
        big = b'{"question": "' + b"x" * (200 * 1024) + b'"}'
        conn.sock.sendall(_request("/v1/query", big))
        status, _, body = conn.response()
        assert status == 413 and b"x" * 64 not in body
    finally:
        conn.close()
    conn = Conn(served.port)
    try:
        conn.sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        status, _, _ = conn.response()
        assert status == 400
    finally:
        conn.close()


def test_an_oversized_request_head_is_refused_by_the_parser(served: Served) -> None:
    """The 16 KiB bound on a request head (max_head_bytes): endless headers cannot grow memory."""
    conn = Conn(served.port)
    try:
        conn.sock.sendall(b"POST /v1/query HTTP/1.1\r\nHost: t\r\n" + b"X-Pad: " + b"a" * (64 * 1024) + b"\r\n")
        status, _, _ = conn.response()
        assert status == 431
    finally:
        conn.close()


def test_serve_options_name_the_parser_even_when_httptools_is_installed() -> None:
    opts = server_options("INFO")
    assert opts["ws"] == "none" and opts["access_log"] is False and opts["log_level"] == "info"
    config = uvicorn.Config(app=_noop, **opts)
    config.load()
    assert issubclass(config.http_protocol_class, H11Protocol)
    assert config.ws_protocol_class is None


async def _noop(scope: object, receive: object, send: object) -> None:
    return None
