"""Uploads through a real ``docquery serve`` (the bundled model, the embedded engine, extractive answers).

    .venv/bin/python -m benchmarks.upload examples                 # the 5 example documents: seconds to answerable
    .venv/bin/python -m benchmarks.upload throughput --files 200   # API chunks/s against the CLI's, query p50
    .venv/bin/python -m benchmarks.upload rss --mb 100             # the service's RSS during a 100 MB upload

* ``examples``: every file under ``examples/`` in one request, the model already loaded (one query first) and the
  upload worker ready (``/readyz``: its parse process started ahead); the time from the request to the moment a
  search for each document's title cites it.
* ``throughput``: N text files of about K KB (deterministic sentences). The CLI's figure is ``run_ingest`` in
  this process with the model loaded before the clock starts; the API's is from the first request to the last
  document indexed, the files sent in requests of 20, nothing else running. Then query p50 (``/v1/query``,
  ``--askers`` at once) idle, and while the same files upload again under other names, with the worker at its
  defaults (the queue raised to hold every file).
* ``rss``: one file of M MB of random bytes (skipped once received, so the figure is the request's and the
  spool's, not a parser's); the service's VmRSS sampled every 10 ms, peak minus idle.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-upload-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
WORDS = [
    "policy",
    "travel",
    "budget",
    "leave",
    "contract",
    "security",
    "laptop",
    "salary",
    "review",
    "meeting",
    "office",
    "report",
    "expense",
    "claim",
    "approval",
    "manager",
    "team",
    "project",
    "deadline",
    "quarter",
    "audit",
    "invoice",
    "supplier",
    "training",
    "safety",
    "holiday",
    "desk",
]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(
        DOCQUERY_DATA_DIR=str(tmp / "data"),
        DOCQUERY_SECRETS_DIR=str(tmp / "secrets"),
        DOCQUERY_METRICS_PORT="0",
        DOCQUERY_API__RATE_LIMIT_PER_MINUTE="1000000",
        DOCQUERY_API__RATE_LIMIT_BURST="1000000",
        DOCQUERY_UPLOADS__RATE_LIMIT_BURST="1000",
        DOCQUERY_LOG_LEVEL="WARNING",
        HF_HUB_OFFLINE="1",
        **extra,
    )
    return env


@contextmanager
def serve(tmp: Path, **extra: str) -> Iterator[tuple[str, int]]:
    """A running service: its URL and pid."""
    secrets = tmp / "secrets"
    secrets.mkdir(parents=True, exist_ok=True)
    entry = {"id": "bench", "sha256": hashlib.sha256(KEY.encode()).hexdigest(), "groups": ["bench"]}
    entry["roles"] = ["ingest", "query"]
    (secrets / "api-keys.json").write_text(json.dumps([entry]))
    record = tmp / "data" / "serve" / "docquery.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "docquery.cli", "serve", "--port", "0"],
        env=_env(tmp, **extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not record.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("docquery serve did not start")
            time.sleep(0.1)
        url = json.loads(record.read_text())["url"]
        httpx.post(f"{url}/v1/search", json={"query": "warm up"}, headers=HEADERS, timeout=300)  # model loaded
        while httpx.get(f"{url}/readyz", timeout=60).json().get("uploads", {}).get("state") == "starting":
            time.sleep(0.1)  # the parse process started ahead has done its imports
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def _post(url: str, files: list[tuple[str, bytes]]) -> dict[str, object]:
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    r = httpx.post(f"{url}/v1/documents", headers=HEADERS, files=parts, data={"groups": "bench"}, timeout=300)
    r.raise_for_status()
    body: dict[str, object] = r.json()
    return body


def _wait_jobs(url: str, jobs: list[str]) -> list[dict[str, object]]:
    while True:
        states = [httpx.get(f"{url}/v1/ingest/jobs/{j}", headers=HEADERS, timeout=60).json() for j in jobs]
        if all(s["done"] for s in states):
            return [d for s in states for d in s["documents"]]
        time.sleep(0.05)


def examples(_: argparse.Namespace) -> None:
    files = sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file() and not p.name.startswith("."))
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp)) as (url, _pid):
        t0 = time.perf_counter()
        accepted = _post(url, [(p.name, p.read_bytes()) for p in files])
        docs = accepted["documents"]
        assert isinstance(docs, list)
        waiting = {d["doc_id"]: d["name"] for d in docs}
        titles: dict[str, str] = {}
        indexed_at: dict[str, float] = {}
        while waiting:
            for doc_id in list(waiting):
                status = httpx.get(f"{url}/v1/documents/{doc_id}", headers=HEADERS, timeout=60).json()
                if status["status"] in ("indexed", "quarantined"):
                    titles[doc_id] = status["title"]
                    indexed_at.setdefault(doc_id, time.perf_counter() - t0)
                    hits = httpx.post(f"{url}/v1/search", json={"query": status["title"]}, headers=HEADERS).json()
                    if doc_id in {c["doc_id"] for c in hits["citations"]}:
                        del waiting[doc_id]
                elif status["status"] in ("failed", "skipped"):
                    raise SystemExit(f"{waiting[doc_id]}: {status['status']} ({status['reason']})")
            time.sleep(0.02)
        seconds = time.perf_counter() - t0
    print(f"{len(files)} example documents answerable {seconds:.2f} s after the request "
          f"(the last indexed at {max(indexed_at.values()):.2f} s)")  # fmt: skip


def _corpus(folder: Path, n: int, kb: int) -> None:
    rng = random.Random(7)
    folder.mkdir(parents=True)
    for i in range(n):
        out: list[str] = []
        size = 0
        while size < kb * 1024:
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18))).capitalize() + ". "
            out.append(sentence)
            size += len(sentence)
        (folder / f"doc-{i:04d}.txt").write_text("".join(out))


def _cli_rate(corpus: Path, tmp: Path) -> tuple[int, float]:
    from docquery.config.settings import Settings
    from docquery.wiring import build_embedder, build_index
    from ingest.pipeline import IngestOptions, run_ingest

    settings = Settings(data_dir=tmp / "cli-data", secrets_dir=tmp / "no-secrets")
    embedder = build_embedder(settings)
    embedder.embed(["load the model before the clock starts"])
    index = build_index(settings, embedder)
    try:
        t0 = time.perf_counter()
        report = run_ingest(settings, IngestOptions(paths=(corpus,), groups=("bench",)), embedder=embedder, index=index)
        seconds = time.perf_counter() - t0
    finally:
        index.close()
        embedder.close()
    return report.chunks_written, seconds


async def _askers(url: str, n: int, stop: threading.Event, out: list[float], rounds: int | None = None) -> None:
    async def one(client: httpx.AsyncClient, seed: int) -> None:
        rng = random.Random(seed)
        done = 0
        while not stop.is_set() and (rounds is None or done < rounds):
            question = " ".join(rng.choice(WORDS) for _ in range(4)) + "?"
            t0 = time.perf_counter()
            r = await client.post(f"{url}/v1/query", json={"question": question}, headers=HEADERS)
            r.raise_for_status()
            out.append(time.perf_counter() - t0)
            done += 1

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(one(client, s) for s in range(n)))


def _upload_all(url: str, files: list[Path], prefix: str) -> tuple[int, float]:
    """Chunks indexed and seconds from the first request to the last document indexed."""
    t0 = time.perf_counter()
    jobs = []
    for i in range(0, len(files), 20):
        batch = [(prefix + p.name, p.read_bytes()) for p in files[i : i + 20]]
        jobs.append(str(_post(url, batch)["job_id"]))
    docs = _wait_jobs(url, jobs)
    seconds = time.perf_counter() - t0
    chunks = 0
    for d in docs:
        status = httpx.get(f"{url}/v1/documents/{d['doc_id']}", headers=HEADERS, timeout=60).json()
        chunks += int(status["chunk_count"])
    return chunks, seconds


def throughput(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        corpus = tmp / "corpus"
        _corpus(corpus, args.files, args.kb)
        cli_chunks, cli_s = _cli_rate(corpus, tmp)
        files = sorted(corpus.iterdir())
        with serve(tmp / "api", DOCQUERY_UPLOADS__QUEUE=str(args.files + 10)) as (url, _pid):
            # 1. Throughput, nothing else running.
            chunks, api_s = _upload_all(url, files, "a-")
            # 2. Query p50 idle, then while the same files upload again under other names.
            idle: list[float] = []
            asyncio.run(_askers(url, args.askers, threading.Event(), idle, rounds=args.idle_rounds))
            during: list[float] = []
            stop = threading.Event()
            asking = threading.Thread(target=lambda: asyncio.run(_askers(url, args.askers, stop, during)))
            asking.start()
            _upload_all(url, files, "b-")
            stop.set()
            asking.join()
    cli_rate, api_rate = cli_chunks / cli_s, chunks / api_s
    print(f"files {args.files} x ~{args.kb} KB; chunks CLI {cli_chunks}, API {chunks}")
    print(f"CLI {cli_rate:.1f} chunks/s ({cli_s:.1f} s); API {api_rate:.1f} chunks/s ({api_s:.1f} s): "
          f"{100 * api_rate / cli_rate:.0f} %")  # fmt: skip
    p50_idle, p50_during = statistics.median(idle), statistics.median(during)
    ratio = p50_during / p50_idle
    print(f"query p50 at {args.askers} askers: idle {1000 * p50_idle:.0f} ms ({len(idle)} queries), "
          f"during the upload {1000 * p50_during:.0f} ms ({len(during)} queries): {ratio:.2f}x")  # fmt: skip
    p99_idle, p99_during = (statistics.quantiles(x, n=100)[98] for x in (idle, during))
    print(f"query p99: idle {1000 * p99_idle:.0f} ms, during the upload {1000 * p99_during:.0f} ms")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def rss(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        big = tmp / "big.bin"
        with big.open("wb") as fh:
            for _ in range(args.mb):
                fh.write(os.urandom(1 << 20))
        with serve(tmp, DOCQUERY_UPLOADS__MAX_FILE_BYTES=str((args.mb + 1) << 20)) as (url, pid):
            time.sleep(1)
            idle = max(_rss_kb(pid) for _ in range(50) if time.sleep(0.01) is None)
            peak = idle
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, _rss_kb(pid))
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample)
            sampler.start()
            with big.open("rb") as fh:
                r = httpx.post(f"{url}/v1/documents", headers=HEADERS, files={"files": ("big.bin", fh)},
                               data={"groups": "bench"}, timeout=600)  # fmt: skip
            r.raise_for_status()
            _wait_jobs(url, [r.json()["job_id"]])
            stop.set()
            sampler.join()
    print(f"{args.mb} MB upload: service RSS idle {idle / 1024:.0f} MB, peak {peak / 1024:.0f} MB, "
          f"rise {(peak - idle) / 1024:.1f} MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upload", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("examples").set_defaults(run=examples)
    t = sub.add_parser("throughput")
    t.add_argument("--files", type=int, default=200)
    t.add_argument("--kb", type=int, default=50)
    t.add_argument("--askers", type=int, default=4)
    t.add_argument("--idle-rounds", type=int, default=10, help="queries per asker while idle")
    t.set_defaults(run=throughput)
    r = sub.add_parser("rss")
    r.add_argument("--mb", type=int, default=100)
    r.set_defaults(run=rss)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
