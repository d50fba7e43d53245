"""A STAND-IN for vLLM's OpenAI-compatible server, on a real socket on 127.0.0.1.

This is not vLLM (vLLM needs a GPU). It speaks the same HTTP protocol as
``vllm serve`` for the three endpoints DocQuery uses, so the generator and
embedder adapters are tested over real HTTP, real SSE framing and real
connection failures:

* ``POST /v1/chat/completions``: non-stream JSON (``chat.completion``) and
  ``stream: true`` SSE lines ``data: {...chat.completion.chunk...}`` ending
  with ``data: [DONE]``;
* ``GET /v1/models``: the model list;
* ``POST /v1/embeddings``: deterministic bag-of-words vectors.

Every endpoint checks ``Authorization: Bearer <key>`` against the keys
accepted now (``config.api_keys``; rotation = change the set). Behaviour is
scripted through :class:`StandInConfig` and may be changed while it runs:
a fixed delay before the first token and between tokens, the reply chunks
(e.g. exfiltration markdown split across chunks), failure statuses for the
next N calls (429/503/500, with an error body that echoes the prompt the way
real servers sometimes do), and dropping the connection mid-stream.

Run it standalone (benchmarks)::

    python -m tests.support.standins.openai_server --port 0 --delay 0.05
    # prints "PORT <n>" once listening
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_KEY = "standin-llm-key"
DEFAULT_REPLY = ["The answer ", "is in the ", "documents ", "[S1]."]
ReplyFn = Callable[[list[dict[str, Any]]], list[str]]


class DropConnection(Exception):
    """Raised inside the stream body: uvicorn aborts the connection mid-response."""


@dataclass
class StandInConfig:
    model: str = "standin-model"
    api_keys: set[str] = field(default_factory=lambda: {DEFAULT_KEY})
    first_token_delay_s: float = 0.0
    token_delay_s: float = 0.0
    reply: list[str] | ReplyFn = field(default_factory=lambda: list(DEFAULT_REPLY))
    # Statuses for the next chat calls, consumed one per call (e.g. [503, 503]).
    fail_statuses: list[int] = field(default_factory=list)
    retry_after: str | None = None
    # Stream mode: abort the connection after this many content chunks.
    drop_after_chunks: int | None = None
    embedding_dim: int = 64
    # What the completion reports as its finish reason ("length": cut at max_tokens).
    finish_reason: str = "stop"


@dataclass
class Stats:
    chat_calls: int = 0
    stream_calls: int = 0
    embedding_calls: int = 0
    model_calls: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    auth_seen: list[str] = field(default_factory=list)  # bearer tokens presented, in order
    unauthorized: int = 0


def hash_vector(text: str, dim: int) -> list[float]:
    vec = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        vec[h % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else [1.0 / math.sqrt(dim)] * dim


def build_app(config: StandInConfig, stats: Stats) -> Starlette:
    def authorized(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else ""
        stats.auth_seen.append(token)
        if token in config.api_keys:
            return True
        stats.unauthorized += 1
        return False

    def unauthorized() -> JSONResponse:
        return JSONResponse(
            {"object": "error", "message": "Unauthorized", "type": "Unauthorized", "code": 401}, status_code=401
        )

    async def models(request: Request) -> Response:
        stats.model_calls += 1
        if not authorized(request):
            return unauthorized()
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": config.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "vllm",
                        "root": config.model,
                        "parent": None,
                        "max_model_len": 8192,
                    }
                ],
            }
        )

    async def embeddings(request: Request) -> Response:
        stats.embedding_calls += 1
        if not authorized(request):
            return unauthorized()
        body = await request.json()
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        data = [
            {"object": "embedding", "index": i, "embedding": hash_vector(str(t), config.embedding_dim)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(str(t).split()) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", config.model),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def chat(request: Request) -> Response:
        stats.chat_calls += 1
        if not authorized(request):
            return unauthorized()
        body = await request.json()
        messages = list(body.get("messages") or [])
        if config.fail_statuses:
            status = config.fail_statuses.pop(0)
            prompt = " ".join(str(m.get("content", "")) for m in messages)
            # Real servers sometimes echo the request in errors: the client must never pass this on.
            headers = {"Retry-After": config.retry_after} if config.retry_after else {}
            return JSONResponse(
                {
                    "object": "error",
                    "message": f"upstream failure while handling: {prompt}",
                    "type": "ServiceUnavailableError",
                    "code": status,
                },
                status_code=status,
                headers=headers,
            )
        chunks = config.reply(messages) if callable(config.reply) else list(config.reply)
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        if not body.get("stream"):
            try:
                await asyncio.sleep(config.first_token_delay_s + config.token_delay_s * max(0, len(chunks) - 1))
            finally:
                stats.in_flight -= 1
            text = "".join(chunks)
            n = len(chunks)
            return JSONResponse(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": config.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "logprobs": None,
                            "finish_reason": config.finish_reason,
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n},
                }
            )
        stats.stream_calls += 1
        options = body.get("stream_options") or {}
        usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
        return StreamingResponse(_stream(cid, created, chunks, usage), media_type="text/event-stream")

    async def _stream(cid: str, created: int, chunks: list[str], include_usage: bool) -> AsyncIterator[bytes]:
        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": config.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        try:
            yield event({"role": "assistant", "content": ""})
            await asyncio.sleep(config.first_token_delay_s)
            for i, text in enumerate(chunks):
                if config.drop_after_chunks is not None and i >= config.drop_after_chunks:
                    raise DropConnection
                if i and config.token_delay_s:
                    await asyncio.sleep(config.token_delay_s)
                yield event({"content": text})
            yield event({}, config.finish_reason)
            if include_usage:  # as OpenAI and vLLM do: a last chunk with no choices
                n = len(chunks)
                tail = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": config.model,
                    "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n},
                }
                yield f"data: {json.dumps(tail)}\n\n".encode()
            yield b"data: [DONE]\n\n"
        finally:
            stats.in_flight -= 1

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


class StandInOpenAIServer:
    """The stand-in, served by uvicorn in a daemon thread on 127.0.0.1 and a free port."""

    def __init__(self, config: StandInConfig | None = None) -> None:
        self.config = config or StandInConfig()
        self.stats = Stats()
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP;
        # with proto 0, Nagle + delayed ACK add 40 ms to every keep-alive response.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        uv_config = uvicorn.Config(
            build_app(self.config, self.stats),
            log_level="critical",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(uv_config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StandInOpenAIServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("stand-in server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> StandInOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="stand-in for vLLM's OpenAI-compatible server (not vLLM)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the first token")
    parser.add_argument("--token-delay", type=float, default=0.0)
    parser.add_argument("--api-key", default=DEFAULT_KEY)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=8, help="content chunks per reply")
    args = parser.parse_args(argv)
    reply = [f"word{i} " for i in range(args.chunks - 1)] + ["[S1]."]
    config = StandInConfig(
        api_keys={args.api_key},
        first_token_delay_s=args.delay,
        token_delay_s=args.token_delay,
        reply=reply,
        embedding_dim=args.dim,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sys.stdout.write(f"PORT {sock.getsockname()[1]}\n")
    sys.stdout.flush()
    uvicorn.Server(
        uvicorn.Config(build_app(config, Stats()), log_level="warning", access_log=False, lifespan="off")
    ).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
