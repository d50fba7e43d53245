"""Service CPU per request, in process: the app's own work without the network, the LLM or the machine's noise.

The real app (``create_app``: middleware, body limit, auth with a real hashed API key, rate and
failed-auth limiters, LLM share, routes, sanitiser, audit chain, JSON logs to /dev/null) on an
embedded Edge index of a few hundred chunks, driven through ``httpx.ASGITransport``. The embedder
counts the benchmark's own words on the event loop and the generator answers at once with a fixed
reply holding a citation marker, so what is counted is the per-request work of the service itself. CPU is
``time.process_time`` over the timed requests (steadier than wall time on a shared machine);
``--profile`` prints a cProfile of one round instead.

    .venv/bin/python -m benchmarks.api_cpu --requests 2000 --rounds 5
    .venv/bin/python -m benchmarks.api_cpu --profile --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import hashlib
import io
import json
import logging
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
import timeit
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal

import httpx
import numpy as np

from docquery.api.app import create_app
from docquery.api.audit import AuditLog
from docquery.api.fairshare import LlmShare
from docquery.api.limits import AuthFailureLimiter, RateLimiter
from docquery.config.settings import Settings
from docquery.core.domain import Chunk, IndexedChunk, Prompt
from docquery.index import open_edge
from docquery.rag.sanitize import Sanitizer
from docquery.rag.sanitize_stream import StreamSanitizer
from docquery.runtime.logs import configure_logging
from docquery.wiring import build_components

TOKEN = "bench-api-key-0123456789"  # noqa: S105 (the benchmark's own throwaway key)
WORDS = ["policy", "leave", "salary", "budget", "contract", "security", "laptop", "travel", "bonus", "audit"]
# The vLLM stand-in's default reply, as its stream splits it: a citation marker sends the answer through the parser.
DEFAULT_REPLY = ["The answer ", "is in the ", "documents ", "[S1]."]


class WordCountEmbedder:
    """One dimension per benchmark word: texts that share words score close, at no model cost, on the event loop."""

    model_id = "bench/word-count"
    dimension = len(WORDS)

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        counts = np.array([[text.count(word) for word in WORDS] for text in texts], dtype=np.float32) + 1e-3
        return (counts / np.linalg.norm(counts, axis=1, keepdims=True)).tolist()

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        return self.embed(texts, query=query)

    def close(self) -> None:
        """Nothing to release."""

    async def aclose(self) -> None:
        """Nothing to release."""


class InstantGenerator:
    """Answers at once with the stand-in's default reply (no network: its cost is not the service's)."""

    @property
    def model(self) -> str:
        return "standin-model"

    @property
    def mode(self) -> Literal["generative", "extractive"]:
        return "generative"

    async def complete(self, prompt: Prompt) -> str:
        return "".join(DEFAULT_REPLY)

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        for piece in DEFAULT_REPLY:
            yield piece

    async def aclose(self) -> None:
        """Nothing to release."""


def build(tmp: Path, chunks: int) -> tuple[object, object]:
    secrets = tmp / "secrets"
    secrets.mkdir()
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    entry = {"id": "bench", "sha256": digest, "groups": ["bench"], "roles": ["query"]}
    (secrets / "api-keys.json").write_text(json.dumps([entry]))
    settings = Settings(
        data_dir=tmp / "data",
        secrets_dir=secrets,
        retrieval={"min_dense_score": 0.0},
        api={"rate_limit_per_minute": 10**9, "rate_limit_burst": 10**9},
    )
    embedder = WordCountEmbedder()
    index = open_edge(tmp / "index", name="bench", model_id=embedder.model_id, dimension=embedder.dimension)
    rng = random.Random(7)
    items = []
    for i in range(chunks):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + "."
        doc = f"doc{i // 10:04d}"
        chunk = Chunk(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc}/{i}")),
            doc_id=doc,
            source=f"{doc}.md",
            title=doc,
            chunk_index=i % 10,
            text=text,
            content_sha256="0" * 64,
            acl_groups=("bench",),
        )
        items.append(IndexedChunk(chunk=chunk, dense=embedder.embed([text])[0]))
    index.upsert(items)
    components = build_components(settings, embedder=embedder, index=index, generator=InstantGenerator())
    return create_app(settings, components=components), index


async def run(app: object, requests: int, stream: bool, rounds: int, profile: bool) -> list[float]:
    rng = random.Random(1)
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    bodies = [
        json.dumps({"question": " ".join(rng.choice(WORDS) for _ in range(5)), "stream": stream}).encode()
        for _ in range(64)
    ]
    per_request_ms: list[float] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for body in bodies[:50]:  # warm-up
            (await client.post("/v1/query", content=body, headers=headers)).raise_for_status()
        for _ in range(rounds):
            prof = cProfile.Profile() if profile else None
            t0 = time.process_time()
            if prof is not None:
                prof.enable()
            for i in range(requests):
                r = await client.post("/v1/query", content=bodies[i % len(bodies)], headers=headers)
                if r.status_code != 200:
                    raise SystemExit(f"status {r.status_code}")
            if prof is not None:
                prof.disable()
                out = io.StringIO()
                stats = pstats.Stats(prof, stream=out).sort_stats(os.environ.get("SORT", "cumulative"))
                stats.print_stats(os.environ.get("FILTER", ""), int(os.environ.get("TOP", "60")))
                if os.environ.get("CALLERS"):
                    stats.print_callers(os.environ["CALLERS"])
                print(out.getvalue())
            per_request_ms.append((time.process_time() - t0) / requests * 1000)
    return per_request_ms


def parts() -> dict[str, float]:
    """Each defence alone, in µs per call (best of 7 repeats: the least disturbed by other load)."""
    rng = random.Random(3)
    snippet = " ".join(rng.choice(WORDS) for _ in range(45))[:300]
    sanitizer = Sanitizer()
    audit = AuditLog()
    share = LlmShare(16, 0.5)
    limiter = RateLimiter(10**9, 10**9)
    failures = AuthFailureLimiter(10, 10)
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, str(i))) for i in range(5)]

    def stream() -> None:
        s = StreamSanitizer(sanitizer)
        for piece in DEFAULT_REPLY:
            s.feed(piece)
        s.flush()

    def fair() -> None:
        # A free slot is taken without suspending: the coroutine ends at its first step.
        with contextlib.suppress(StopIteration):
            share.acquire("key:bench").send(None)
        share.release("key:bench")

    def record() -> None:
        audit.record(
            request_id=uuid.uuid4().hex,
            principal="key:bench",
            method="POST",
            route="/v1/query",
            status=200,
            outcome="answered",
            doc_ids=[f"doc{i:04d}" for i in range(5)],
            chunk_ids=ids,
            duration_ms=1.5,
        )

    cases = {
        "answer (stand-in reply, one shot)": lambda: sanitizer("".join(DEFAULT_REPLY)),
        "answer (stand-in reply, streamed)": stream,
        "citation snippet label (300 chars)": lambda: sanitizer.label(snippet),
        "citation short label (doc id)": lambda: sanitizer.label("doc0001.md"),
        "audit record + JSON log line": record,
        "LLM share acquire + release": fair,
        "rate limiter take": lambda: limiter.take("key:bench"),
        "failed-auth limiter check": lambda: failures.blocked("127.0.0.1"),
    }
    return {name: min(timeit.repeat(fn, number=2000, repeat=7)) / 2000 * 1e6 for name, fn in cases.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--stream", action="store_true", help="stream: true (SSE) instead of JSON")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each round")
    parser.add_argument("--parts", action="store_true", help="time each defence alone (µs per call)")
    args = parser.parse_args()
    log_sink = open("/dev/null", "w")  # noqa: SIM115, PTH123 (kept open for the run)
    if args.parts:
        configure_logging("INFO", "json")
        sys.stderr = log_sink
        us = parts()
        sys.stderr = sys.__stderr__
        print(json.dumps({name: round(v, 2) for name, v in us.items()}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        app, index = build(Path(tmp), args.chunks)
        # The JSON log lines are formatted and written, as in production, then dropped.
        configure_logging("INFO", "json")
        logging.getLogger("httpx").setLevel(logging.WARNING)
        sys.stderr = log_sink
        try:
            ms = asyncio.run(run(app, args.requests, args.stream, args.rounds, args.profile))
        finally:
            sys.stderr = sys.__stderr__
            index.close()  # type: ignore[attr-defined]
    kind = "stream" if args.stream else "json"
    rounded = [round(x, 4) for x in ms]
    print(json.dumps({"kind": kind, "cpu_ms_per_request": rounded, "median": round(statistics.median(ms), 4)}))


if __name__ == "__main__":
    main()
