"""The LLM share under load, through real processes: work-conserving for one tenant, fair between two.

Setup (all on 127.0.0.1): the vLLM stand-in (tests/support/standins/openai_server.py, run as a program; not vLLM)
answering after ``--delay`` seconds and serving the embeddings, ``--chunks`` chunks in an embedded collection, and
``docquery serve`` with two API keys of the same groups but different tenants; ``llm.max_concurrency`` 64, the
default share (0.25) and queue (64 places, 2 s).

1. One key, ``--clients`` concurrent clients (32), for ``--seconds``: every answer should be 200.
2. Tenant A floods with ``--flood`` clients (96) while tenant B sends with 4: B's answers and their latency.

    .venv/bin/python -m benchmarks.fair_share --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.api_overhead import ingest, start_service, start_standin

SLOTS = 64
Q = {"question": "policy leave salary budget"}
DROPPED = 0  # the counters' key for a request whose connection failed (no status)
TENANT_KEYS = {"tenant-a": "bench-key-tenant-a-0123456789", "tenant-b": "bench-key-tenant-b-0123456789"}


def write_keys(work: Path) -> Path:
    """Two keys that read the same documents and draw on different tenants' shares."""
    secrets = work / "secrets"
    secrets.mkdir()
    entries = [
        {"id": tenant, "sha256": hashlib.sha256(key.encode()).hexdigest(), "groups": ["bench"], "roles": ["query"]}
        | {"tenant": tenant}
        for tenant, key in TENANT_KEYS.items()
    ]
    (secrets / "api-keys.json").write_text(json.dumps(entries))
    for name in ("llm-api-key", "embedder-api-key"):
        (secrets / name).write_text("bench-llm-key\n")
    return secrets


async def drive(base: str, key: str, clients: int, until: float, *, out: Counter[int], lat: list[float]) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=clients)) as c:

        async def one() -> None:
            while time.monotonic() < until:
                t0 = time.monotonic()
                try:
                    r = await c.post("/v1/query", json=Q, headers=headers)
                except httpx.TransportError:
                    out[DROPPED] += 1  # the connection closed or reset with the request unanswered
                    continue
                out[r.status_code] += 1
                if r.status_code == 200:
                    lat.append(time.monotonic() - t0)

        await asyncio.gather(*(one() for _ in range(clients)))


def summary(name: str, out: Counter[int], lat: list[float], seconds: float) -> str:
    p50 = statistics.median(lat) * 1000 if lat else float("nan")
    p99 = statistics.quantiles(lat, n=100)[98] * 1000 if len(lat) >= 100 else float("nan")
    others = sum(v for k, v in out.items() if k not in (200, 503, DROPPED))
    return (
        f"{name}: {out[200]} answers ({out[200] / seconds:.0f}/s), {out[503]} of 503, other {others}, "
        f"{out[DROPPED]} connections dropped; "
        f"latency p50 {p50:.0f} ms, p99 {p99:.0f} ms"
    )


def run(base: str, args: argparse.Namespace) -> None:
    alone: Counter[int] = Counter()
    lat: list[float] = []
    key_a, key_b = TENANT_KEYS["tenant-a"], TENANT_KEYS["tenant-b"]
    asyncio.run(drive(base, key_a, args.clients, time.monotonic() + args.seconds, out=alone, lat=lat))
    print(f"slots {SLOTS}, share 0.25, stand-in first token {args.delay * 1000:.0f} ms")
    print(summary(f"one key, {args.clients} clients", alone, lat, args.seconds))
    flood: Counter[int] = Counter()
    polite: Counter[int] = Counter()
    flat: list[float] = []
    plat: list[float] = []

    async def both() -> None:
        until = time.monotonic() + args.seconds
        await asyncio.gather(
            drive(base, key_a, args.flood, until, out=flood, lat=flat),
            drive(base, key_b, 4, until, out=polite, lat=plat),
        )

    asyncio.run(both())
    print(summary(f"tenant A flooding, {args.flood} clients", flood, flat, args.seconds))
    print(summary("tenant B, 4 clients", polite, plat, args.seconds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--flood", type=int, default=96)
    ap.add_argument("--chunks", type=int, default=1000)
    ap.add_argument("--delay", type=float, default=0.05, help="the stand-in's time to first token, seconds")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dq-fair-"))
    standin, llm_base = start_standin(args.delay)
    service: subprocess.Popen[bytes] | None = None
    try:
        ingest(work / "data", args.chunks, random.Random(7), llm_base)
        settings = {
            "DOCQUERY_LLM__MAX_CONCURRENCY": str(SLOTS),
            "DOCQUERY_API__LLM_SHARE": "0.25",
            "DOCQUERY_API__RATE_LIMIT_PER_MINUTE": str(10**7),
        }
        service, port, _ = start_service(work, write_keys(work), llm_base, settings)
        run(f"http://127.0.0.1:{port}", args)
    finally:
        for proc in (service, standin):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
