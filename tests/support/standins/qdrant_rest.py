"""A STAND-IN for a Qdrant server's REST API, on a real socket on 127.0.0.1.

This is not Qdrant (no server binary runs here). It answers the few endpoints a
``QdrantIndex`` calls to open an existing collection and search it, with the shapes
qdrant-client parses, and it checks credentials as Qdrant does (``AuthKeys::extract_key``
in qdrant/qdrant ``src/common/auth/mod.rs``): the ``api-key`` header, or else
``Authorization: Bearer <key>``, against the keys accepted now (``keys``; rotation =
change the set). Every request is recorded with the key it presented, never its body.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from docquery.core.collection import META_POINT_ID
from docquery.index.payload import meta_payload


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    key: str | None


class StandInQdrant:
    def __init__(self, *, keys: set[str], model_id: str, dimension: int) -> None:
        self.keys = set(keys)
        self.meta = meta_payload(model_id, dimension)
        self.seen: list[Seen] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StandInQdrant:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, method: str, path: str, body: dict[str, Any]) -> Any:
        if method == "GET" and re.fullmatch(r"/collections/[^/]+/exists", path):
            return {"exists": True}
        if path.endswith("/points/query/batch"):
            return [{"points": []} for _ in body.get("searches", [])]
        if path.endswith("/points/count"):
            return {"count": 0}
        if path.endswith("/points"):  # retrieve by ids
            meta = str(META_POINT_ID)
            return [{"id": meta, "payload": self.meta}] if meta in [str(i) for i in body.get("ids", [])] else []
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                bearer = self.headers.get("authorization", "")
                key = self.headers.get("api-key") or (
                    bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else None
                )
                path = self.path.split("?")[0]
                stand_in.seen.append(Seen(self.command, path, key))
                if key is None or key not in stand_in.keys:
                    self._reply(401, {"status": {"error": "Invalid API key or JWT"}})
                    return
                self._reply(200, {"result": stand_in.answer(self.command, path, body), "status": "ok", "time": 0.0})

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads ``seen``."""

        return Handler
