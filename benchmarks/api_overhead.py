"""Query service overhead: the time the service adds on top of embedding, search and the LLM.

Setup (all on 127.0.0.1, all real processes):

* the vLLM stand-in (tests/support/standins/openai_server.py; not vLLM) with a fixed
  delay before the first token, serving chat completions and embeddings;
* 10,000 chunks written into an embedded Edge collection, with the stand-in's
  own deterministic vectors from its /v1/embeddings (so the service's remote embedder agrees);
* ``docquery serve`` as a real uvicorn server process, with API-key auth,
  the remote embedder and the OpenAI-compatible generator pointed at the
  stand-in, rate limits raised out of the way, audit/access logs on (to a file).

The service reports its stage durations in ``Server-Timing`` (embed, search,
llm, app). Overhead per request = client-observed latency - (embed + search +
llm); "in-app" overhead = app - (embed + search + llm), i.e. without the HTTP
stack and the client. Streaming TTFT overhead = time to the first ``delta``
event through the service - the stand-in's own time to first token measured
directly against it.

    .venv/bin/python -m benchmarks.api_overhead                      # full run, prints the tables
    .venv/bin/python -m benchmarks.api_overhead --llm-delay 0.5 --levels 32   # the target row
    .venv/bin/python -m benchmarks.api_overhead --quick              # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.wire_timing import LoopbackCapture, Segment, exchanges, parse_timing, ttft_overheads
from docquery.core.collection import chunk_point_id
from docquery.core.domain import Chunk, DocumentRecord, IndexedChunk
from docquery.index import open_edge

ROOT = Path(__file__).resolve().parent.parent
# The vLLM stand-in is a test support program, run here as a process (never imported by the benchmarks).
STANDIN = ROOT / "tests" / "support" / "standins" / "openai_server.py"

DIM = 384
EMBED_MODEL = "standin-embed"
LLM_KEY = "bench-llm-key"
API_KEY = "bench-api-key-0123456789"
WORDS = [
    "policy",
    "leave",
    "salary",
    "budget",
    "contract",
    "security",
    "laptop",
    "travel",
    "bonus",
    "audit",
    "vacation",
    "expense",
    "review",
    "onboarding",
    "privacy",
    "incident",
    "access",
    "password",
    "backup",
    "retention",
    "vendor",
    "invoice",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def embed_via(llm_base: str, texts: list[str]) -> list[list[float]]:
    """The corpus's vectors from the stand-in's own /v1/embeddings, so that questions the service embeds there match."""
    response = httpx.post(
        f"{llm_base}/embeddings",
        json={"model": EMBED_MODEL, "input": texts},
        headers={"Authorization": f"Bearer {LLM_KEY}"},
        timeout=60,
    )
    response.raise_for_status()
    return [item["embedding"] for item in sorted(response.json()["data"], key=lambda item: item["index"])]


def ingest(data_dir: Path, n_chunks: int, rng: random.Random, llm_base: str) -> float:
    t0 = time.perf_counter()
    index = open_edge(data_dir / "collections" / "docquery", name="docquery", model_id=EMBED_MODEL, dimension=DIM)
    per_doc = 10
    pending: list[Chunk] = []

    def flush() -> None:
        vectors = embed_via(llm_base, [chunk.text for chunk in pending])
        index.upsert([IndexedChunk(chunk=chunk, dense=vector) for chunk, vector in zip(pending, vectors, strict=True)])
        pending.clear()

    for d in range(n_chunks // per_doc):
        doc_id = f"doc{d:05d}"
        group = "bench" if d % 2 == 0 else "other"
        sha = hashlib.sha256(doc_id.encode()).hexdigest()
        for i in range(per_doc):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + "."
            pending.append(
                Chunk(
                    id=chunk_point_id(doc_id, sha, i),
                    doc_id=doc_id,
                    source=f"{doc_id}.md",
                    title=doc_id,
                    chunk_index=i,
                    text=text,
                    content_sha256=sha,
                    acl_groups=(group,),
                )
            )
        index.put_document(
            DocumentRecord(
                doc_id=doc_id,
                source=f"{doc_id}.md",
                root="/bench",
                content_sha256=sha,
                chunk_count=per_doc,
                acl_groups=(group,),
                title=doc_id,
            )
        )
        if len(pending) >= 1000:
            flush()
    if pending:
        flush()
    index.optimize()  # as `docquery ingest` does at the end of a run
    index.close()
    return time.perf_counter() - t0


@dataclass
class Sample:
    latency: float
    embed: float
    search: float
    llm: float
    app: float
    status: int


@dataclass
class Level:
    clients: int
    samples: list[Sample] = field(default_factory=list)
    wall: float = 0.0
    errors: int = 0
    service_cpu_s: float = 0.0
    wire: list[float] = field(default_factory=list)  # service-side overhead from packet timestamps


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def question(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))


class RawConnection:
    """A minimal keep-alive HTTP/1.1 client: the load generator shares the 2 cores with the
    service, so it should spend as little CPU per request as possible (httpx costs more)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None and self.writer is not None
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{head}\r\n".encode()
            + body
        )
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {}
        for line in lines[1:]:
            if ":" in line:
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
        payload = await self.reader.readexactly(int(fields.get("content-length", "0")))
        if fields.get("connection", "").lower() == "close":
            self.writer.close()
        return status, fields, payload

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def run_level(
    port: int, clients: int, total: int, max_s: float, rng: random.Random, *, ramp_s: float = 0.0
) -> Level:
    """``clients`` closed-loop clients; their first requests are spread evenly over ``ramp_s``."""
    level = Level(clients)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    remaining = total
    deadline = time.perf_counter() + max_s
    conns = [RawConnection("127.0.0.1", port) for _ in range(clients)]

    async def worker(n: int, conn: RawConnection) -> None:
        nonlocal remaining
        await asyncio.sleep(ramp_s * n / clients)
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            body = json.dumps({"question": question(rng), "top_k": 5}).encode()
            t0 = time.perf_counter()
            status, fields, _ = await conn.post("/v1/query", body, headers)
            latency = time.perf_counter() - t0
            if status != 200:
                level.errors += 1
                continue
            t = parse_timing(fields.get("server-timing", ""))
            level.samples.append(
                Sample(latency, t.get("embed", 0), t.get("search", 0), t.get("llm", 0), t.get("app", 0), status)
            )

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(worker(n, c) for n, c in enumerate(conns)))
    finally:
        for c in conns:
            c.close()
    level.wall = time.perf_counter() - t0
    return level


async def ttft(base: str, llm_base: str, n: int, rng: random.Random) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"service": [], "standin": [], "retrieval": []}
    async with httpx.AsyncClient(timeout=60) as client:
        for _ in range(n):
            # The stand-in's own time to first content token.
            t0 = time.perf_counter()
            body = {"model": "standin-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            async with client.stream(
                "POST", f"{llm_base}/chat/completions", json=body, headers={"Authorization": f"Bearer {LLM_KEY}"}
            ) as r:
                async for line in r.aiter_lines():  # read to the end: closing early aborts the stream
                    if (
                        len(out["standin"]) < len(out["service"]) + 1
                        and line.startswith("data: {")
                        and '"content": "' in line
                        and '"content": ""' not in line
                    ):
                        out["standin"].append(time.perf_counter() - t0)
            # Through the service: time to the first delta event.
            t0 = time.perf_counter()
            async with client.stream(
                "POST",
                f"{base}/v1/query",
                json={"question": question(rng), "stream": True},
                headers={"Authorization": f"Bearer {API_KEY}"},
            ) as r:
                t = parse_timing(r.headers.get("server-timing", ""))
                seen = False
                async for line in r.aiter_lines():
                    if line == "event: delta" and not seen:
                        seen = True
                        out["service"].append(time.perf_counter() - t0)
                        out["retrieval"].append(t.get("embed", 0) + t.get("search", 0))
    return out


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def rss_kib(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def service_env(work: Path, secrets: Path, llm_base: str, metrics_port: int) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")},
        "DOCQUERY_DATA_DIR": str(work / "data"),
        "DOCQUERY_SECRETS_DIR": str(secrets),
        "DOCQUERY_EMBEDDER__KIND": "openai",
        "DOCQUERY_EMBEDDER__BASE_URL": llm_base,
        "DOCQUERY_EMBEDDER__MODEL": EMBED_MODEL,
        "DOCQUERY_EMBEDDER__DIMENSION": str(DIM),
        "DOCQUERY_LLM__BASE_URL": llm_base,
        "DOCQUERY_LLM__MODEL": "standin-model",
        "DOCQUERY_LLM__MAX_CONCURRENCY": "512",
        "DOCQUERY_RETRIEVAL__MIN_DENSE_SCORE": "-1",
        "DOCQUERY_API__RATE_LIMIT_PER_MINUTE": "100000000",
        "DOCQUERY_API__RATE_LIMIT_BURST": "10000000",
        # One API key for every client: the per-principal LLM share would cap the load itself.
        "DOCQUERY_API__LLM_SHARE": "1",
        "DOCQUERY_METRICS_PORT": str(metrics_port),
        "DOCQUERY_LOG_LEVEL": "warning",
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument(
        "--llm-delay", type=float, nargs="+", default=[0.05, 0.5], help="stand-in delays before the first token (s)"
    )
    ap.add_argument("--requests", type=int, default=600, help="requests per concurrency level (upper bound)")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="time bound per concurrency level")
    ap.add_argument("--ttft-samples", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument(
        "--levels", nargs="+", default=None, help='only these rows of the plan, e.g. "32" (before/after runs)'
    )
    ap.add_argument("--out", type=Path, default=None, help="also append the tables to this Markdown file")
    args = ap.parse_args()
    if args.quick:
        args.chunks, args.requests, args.max_seconds, args.ttft_samples = 1000, 100, 5.0, 20
        args.llm_delay = args.llm_delay[:1]
    return args


def write_secrets(work: Path) -> Path:
    secrets = work / "secrets"
    secrets.mkdir()
    entry = {"id": "bench", "sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "groups": ["bench"]}
    (secrets / "api-keys.json").write_text(json.dumps([{**entry, "roles": ["query"]}]))
    (secrets / "llm-api-key").write_text(LLM_KEY + "\n")
    (secrets / "embedder-api-key").write_text(LLM_KEY + "\n")
    return secrets


def start_standin(delay: float) -> tuple[subprocess.Popen[bytes], str]:
    cmd = [sys.executable, str(STANDIN), "--port", "0", "--delay", str(delay)]
    cmd += ["--api-key", LLM_KEY, "--dim", str(DIM), "--chunks", "8"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    port_line = proc.stdout.readline().decode()
    return proc, f"http://127.0.0.1:{int(port_line.split()[1])}/v1"


def start_service(
    work: Path, secrets: Path, llm_base: str, settings: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int, int]:
    """``docquery serve`` on free ports; ``settings`` are DOCQUERY_* variables over the benchmark's own."""
    port, metrics_port = free_port(), free_port()
    log = (work / "service.log").open("wb")
    service = subprocess.Popen(
        [sys.executable, "-m", "docquery.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env={**service_env(work, secrets, llm_base, metrics_port), **(settings or {})},
        stdout=log,
        stderr=log,
    )
    wait_http(f"http://127.0.0.1:{port}/healthz", service)
    return service, port, metrics_port


@dataclass
class Run:
    delay: float
    levels: dict[int | str, Level]
    ttft: dict[str, list[float]]
    rss_idle: int
    rss_now: int
    rss_peak: int
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average at the start and the end


def measure(args: argparse.Namespace, delay: float, rng: random.Random) -> Run:
    load0 = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="dq-bench-"))
    secrets = write_secrets(work)
    standin, llm_base = start_standin(delay)
    service: subprocess.Popen[bytes] | None = None
    try:
        print(f"stand-in LLM at {llm_base} (delay {delay * 1000:.0f} ms)", flush=True)
        print(f"ingested {args.chunks} chunks in {ingest(work / 'data', args.chunks, rng, llm_base):.1f} s", flush=True)
        service, port, metrics_port = start_service(work, secrets, llm_base)
        rss_idle = rss_kib(service.pid)[0]
        print(f"service pid {service.pid} on port {port}, idle RSS {rss_idle / 1024:.0f} MiB", flush=True)
        asyncio.run(run_level(port, 8, 50, 10, rng))  # warm-up
        levels: dict[int | str, Level] = {}
        # Closed-loop clients that all start at once stay in lockstep behind a fixed LLM delay:
        # every round, all of them arrive within a millisecond. So each level spreads its clients'
        # first requests evenly over one LLM delay; "32, all at once" keeps the lockstep start.
        plan: list[tuple[int | str, int, float]] = [(1, 1, 0.0), (8, 8, delay), (32, 32, delay)]
        plan += [("32, all at once", 32, 0.0), (128, 128, delay)]
        if args.levels:
            plan = [row for row in plan if str(row[0]) in args.levels or row[0] == 32]
        for label, clients, ramp in plan:
            total = max(args.requests, clients * 4) if clients > 1 else min(args.requests, 200)
            cpu0 = cpu_seconds(service.pid)
            capture = LoopbackCapture(port)
            wired = capture.start()
            lv = levels[label] = asyncio.run(run_level(port, clients, total, args.max_seconds, rng, ramp_s=ramp))
            lv.service_cpu_s = cpu_seconds(service.pid) - cpu0
            if wired:
                lv.wire = wire_overheads(capture.stop(), port)
            print(
                f"{label!s:>4} clients: {len(lv.samples)} ok, {lv.errors} errors, "
                f"{len(lv.samples) / lv.wall:.1f} req/s",
                flush=True,
            )
        capture = LoopbackCapture(port, standin_port := int(llm_base.rsplit(":", 1)[1].split("/")[0]))
        wired = capture.start()
        tt = asyncio.run(ttft(f"http://127.0.0.1:{port}", llm_base, args.ttft_samples, rng))
        tt["wire"] = ttft_overheads(capture.stop(), port, standin_port) if wired else []
        rss_now, rss_peak = rss_kib(service.pid)
        metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
        assert "docquery_http_requests_total" in metrics
        return Run(delay, levels, tt, rss_idle, rss_now, rss_peak, (load0, os.getloadavg()[0]))
    finally:
        for proc in (service, standin):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(work, ignore_errors=True)  # the collection, keys and service log of this run


def main() -> int:
    args = parse_args()
    rng = random.Random(7)
    runs = [measure(args, delay, rng) for delay in args.llm_delay]
    table = render(args, runs)
    print(table)
    if args.out is not None:
        write_section(args.out, table)
        print(f"written to {args.out}")
    return 0


def wire_overheads(segments: list[Segment], port: int) -> list[float]:
    """Per request: the service's span on the wire less its embed, search and LLM stage times."""
    return [
        ex.span - sum(ex.timing.get(k, 0.0) for k in ("embed", "search", "llm"))
        for ex in exchanges(segments, port)
        if ex.status == 200 and "llm" in ex.timing
    ]


def _overheads(lv: Level) -> tuple[list[float], list[float], list[float]]:
    client = [s.latency - (s.embed + s.search + s.llm) for s in lv.samples]
    in_app = [s.app - (s.embed + s.search + s.llm) for s in lv.samples]
    excluded = [s.embed + s.search + s.llm for s in lv.samples]
    return client, in_app, excluded


def verdict(ok: bool) -> str:
    return "meets" if ok else "misses"


def render(args: argparse.Namespace, runs: list[Run]) -> str:
    delays = ", ".join(f"{r.delay * 1000:.0f} ms" for r in runs)
    lines = [
        "## Query service overhead",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `benchmarks/api_overhead.py` "
        f"on {os.cpu_count()} cores ({cpu_model()}), "
        f"{args.chunks:,} chunks in the embedded Edge index, a vLLM stand-in on 127.0.0.1 "
        f"(not vLLM) with a fixed delay before the first token ({delays}), "
        "`docquery serve` as a uvicorn process with API-key auth, the remote embedder and the "
        "OpenAI-compatible generator pointed at the stand-in, audit and access logs on (to a file). "
        "The load generator (one asyncio process, a minimal keep-alive HTTP/1.1 client) and the "
        "stand-in run on the same 2 cores as the service (load averages below). Clients are closed-loop; "
        "each level spreads its clients' first requests evenly over one LLM delay, since clients that "
        "start together stay in lockstep behind a fixed delay and arrive all at once every round. "
        'The row "32, all at once" keeps that lockstep start.',
        "",
        "Overhead = latency - (embed + search + LLM), with the stage times from the service's "
        "`Server-Timing` header (each timed around its own call inside the service), taken three ways. "
        "Client-observed: the load generator's latency, which also holds the kernel's loopback and the "
        "load generator's own work (building and parsing HTTP, its event loop, on the same 2 cores). "
        "Service-side: the span from the request's last TCP segment into the service (the request is "
        "complete) to the response's last segment out, from the kernel's packet timestamps on `lo` "
        "(`benchmarks/wire_timing.py`, a raw "
        "packet socket): the HTTP parser, waiting for the event loop, the app and the response writes are "
        "inside it, the load generator is not. In-app: from the first middleware to the response start. "
        "When the 2 cores are saturated, the overhead is mostly queueing for CPU, not work per request: "
        "the CPU column is the service's own CPU time per request.",
        "",
    ]
    for run in runs:
        lines += render_run(run)
    return "\n".join(lines)


def render_run(run: Run) -> list[str]:
    ms = 1000.0
    lines = [
        f"### Stand-in LLM delay {run.delay * ms:.0f} ms",
        "",
        f"Machine 1-minute load average {run.load[0]:.1f} at the start of this run, {run.load[1]:.1f} at the end.",
        "",
        "| clients | requests | req/s | latency p50 (ms) | client-observed overhead p50 / p99 (ms) "
        "| service-side overhead p50 / p99 (ms) | in-app overhead p50 / p99 (ms) | embed+search+LLM p50 (ms) "
        "| service CPU / request (ms) | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for clients, lv in run.levels.items():
        client, in_app, excluded = _overheads(lv)
        cpu = lv.service_cpu_s / max(1, len(lv.samples)) * ms
        lines.append(
            f"| {clients} | {len(lv.samples)} | {len(lv.samples) / lv.wall:.1f} "
            f"| {pct([s.latency for s in lv.samples], 50) * ms:.2f} "
            f"| {pct(client, 50) * ms:.2f} / {pct(client, 99) * ms:.2f} "
            f"| {_pair(lv.wire)} "
            f"| {pct(in_app, 50) * ms:.2f} / {pct(in_app, 99) * ms:.2f} "
            f"| {pct(excluded, 50) * ms:.2f} | {cpu:.2f} | {lv.errors} |"
        )
    c32, a32, _ = _overheads(run.levels[32])
    w32 = run.levels[32].wire
    svc, own, retr, wire = run.ttft["service"], run.ttft["standin"], run.ttft["retrieval"], run.ttft["wire"]
    raw = [s - o for s, o in zip(svc, own, strict=False)]
    net = [s - o - r for s, o, r in zip(svc, own, retr, strict=False)]
    lines += [
        "",
        f"- Targets at 32 clients, service-side: overhead p50 ≤ 2 ms: {_verdict(w32, 50, 0.002)}; "
        f"p99 ≤ 10 ms: {_verdict(w32, 99, 0.010)}. Client-observed: p50 {pct(c32, 50) * ms:.2f} ms "
        f"({verdict(pct(c32, 50) <= 0.002)}), p99 {pct(c32, 99) * ms:.2f} ms ({verdict(pct(c32, 99) <= 0.010)}). "
        f"In-app: p50 {pct(a32, 50) * ms:.2f} ms, p99 {pct(a32, 99) * ms:.2f} ms.",
        f"- Streaming time to first token ({len(svc)} sequential requests): the stand-in's own "
        f"p50 {pct(own, 50) * ms:.2f} ms, through the service p50 {pct(svc, 50) * ms:.2f} ms. "
        f"Overhead p50 {pct(raw, 50) * ms:.2f} ms / p99 {pct(raw, 99) * ms:.2f} ms including the question's "
        f"embedding and the search; p50 {pct(net, 50) * ms:.2f} ms / p99 {pct(net, 99) * ms:.2f} ms without "
        f"them (target ≤ 5 ms: {verdict(pct(net, 50) <= 0.005)}). Service-side, from packet timestamps "
        f"(first `delta` out less request complete, less the stand-in's own chat-request-complete to "
        f"first-token-out, less "
        f"embed and search; {len(wire)} requests): {_verdict(wire, 50, 0.005)} at p50, p99 "
        f"{pct(wire, 99) * 1000 if wire else float('nan'):.2f} ms.",
        f"- Service RSS: {run.rss_idle / 1024:.0f} MiB idle after start, {run.rss_now / 1024:.0f} MiB after "
        f"the runs, {run.rss_peak / 1024:.0f} MiB peak (VmHWM). The embedder is remote here (the stand-in's "
        "`/v1/embeddings`); with the bundled local model the process also holds torch and the model.",
        "",
    ]
    return lines


def _pair(values: list[float]) -> str:
    return f"{pct(values, 50) * 1000:.2f} / {pct(values, 99) * 1000:.2f}" if values else "n/a"


def _verdict(values: list[float], q: int, limit: float) -> str:
    if not values:
        return "not measured (no raw packet socket: needs CAP_NET_RAW)"
    return f"{verdict(pct(values, q) <= limit)} ({pct(values, q) * 1000:.2f} ms)"


def write_section(path: Path, table: str) -> None:
    """Replace this benchmark's section in place, or append it; other sections are left alone."""
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    header = "## Query service overhead"
    if header in text:
        start = text.index(header)
        nxt = text.find("\n## ", start + len(header))
        text = text[:start] + table + ("\n" + text[nxt + 1 :] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + table
    path.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
