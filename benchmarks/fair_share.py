"""The LLM share under load, through a real socket: work-conserving for one tenant, fair between two.

Setup: the app served by uvicorn with ``docquery serve``'s options on 127.0.0.1, an embedded index with
one document, and the vLLM stand-in (tests/support/standins; not vLLM) answering after ``--delay``
seconds; ``llm.max_concurrency`` 64, the default share (0.25) and queue.

1. One key, ``--clients`` concurrent clients (32), for ``--seconds``: every answer should be 200.
2. Tenant A floods with ``--flood`` clients (96), tenant B sends with 4: B's answers and their latency.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/fair_share.py --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docquery.api.server import server_options  # noqa: E402
from tests.support.api_harness import bearer, llm_generator, make_harness  # noqa: E402
from tests.support.standins.openai_server import StandInOpenAIServer  # noqa: E402

SLOTS = 64
Q = {"question": "how many vacation days of paid leave"}


async def drive(base: str, token: str, clients: int, until: float, *, out: Counter[int], lat: list[float]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=clients)) as c:

        async def one() -> None:
            while time.monotonic() < until:
                t0 = time.monotonic()
                r = await c.post("/v1/query", json=Q, headers=bearer(token))
                out[r.status_code] += 1
                if r.status_code == 200:
                    lat.append(time.monotonic() - t0)

        await asyncio.gather(*(one() for _ in range(clients)))


def summary(name: str, out: Counter[int], lat: list[float], seconds: float) -> str:
    p50 = statistics.median(lat) * 1000 if lat else float("nan")
    p99 = statistics.quantiles(lat, n=100)[98] * 1000 if len(lat) >= 100 else float("nan")
    return (
        f"{name}: {out[200]} answers ({out[200] / seconds:.0f}/s), {out[503]} of 503, "
        f"other {sum(v for k, v in out.items() if k not in (200, 503))}; latency p50 {p50:.0f} ms, p99 {p99:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--flood", type=int, default=96)
    ap.add_argument("--delay", type=float, default=0.05, help="the stand-in's time to first token, seconds")
    args = ap.parse_args()
    with StandInOpenAIServer() as llm, tempfile.TemporaryDirectory() as tmp:
        llm.config.first_token_delay_s = args.delay
        api = {"rate_limit_per_minute": 10**7, "rate_limit_burst": 10**7}
        harnesses = make_harness(
            Path(tmp),
            generator=llm_generator(llm, max_concurrency=SLOTS, read_timeout_s=30.0, total_timeout_s=60.0),
            llm={"max_concurrency": SLOTS},
            api=api,
        )
        h = next(harnesses)
        h.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        h.corpus.add("pay", ["Payroll runs on the 25th; vacation days are paid at the base rate."], ["hr"])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(h.app, lifespan="off", **server_options("critical", h.settings.api)))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            alone: Counter[int] = Counter()
            lat: list[float] = []
            asyncio.run(drive(base, "tok-alice-eng", args.clients, time.monotonic() + args.seconds, out=alone, lat=lat))
            print(f"slots {SLOTS}, share 0.25, stand-in first token {args.delay * 1000:.0f} ms")
            print(summary(f"one key, {args.clients} clients", alone, lat, args.seconds))
            flood: Counter[int] = Counter()
            polite: Counter[int] = Counter()
            flat: list[float] = []
            plat: list[float] = []

            async def both() -> None:
                until = time.monotonic() + args.seconds
                await asyncio.gather(
                    drive(base, "tok-alice-eng", args.flood, until, out=flood, lat=flat),
                    drive(base, "tok-bob-hr", 4, until, out=polite, lat=plat),
                )

            asyncio.run(both())
            print(summary(f"tenant A flooding, {args.flood} clients", flood, flat, args.seconds))
            print(summary("tenant B, 4 clients", polite, plat, args.seconds))
        finally:
            server.should_exit = True
            thread.join(timeout=5)
            sock.close()
            for _ in harnesses:
                pass


if __name__ == "__main__":
    main()
