"""A loopback HTTP server that answers the few Qdrant REST calls an index open makes, and records
the credential of every request, so a test can see which key a client sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    server: _StubServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.credentials.append(self.headers.get("Authorization") or self.headers.get("api-key") or "")
        result: Any = {"operation_id": 1, "status": "completed"}
        if self.path.split("?")[0].endswith("/exists"):
            result = {"exists": True}
        elif self.command == "POST" and self.path.split("?")[0].endswith("/points"):
            result = []  # retrieve: no meta point yet
        body = json.dumps({"result": result, "status": "ok", "time": 0}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output quiet


class _StubServer(ThreadingHTTPServer):
    credentials: list[str]


@contextmanager
def qdrant_stub() -> Iterator[tuple[str, list[str]]]:
    """Yield (base URL, the Authorization/api-key header of each request so far)."""
    server = _StubServer(("127.0.0.1", 0), _Handler)
    server.credentials = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.credentials
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
