"""How search latency, recall, memory, write speed and build time grow with the collection.

Builds a collection of ``--chunks`` N synthetic chunks through the product's own index
adapter and write path (``QdrantIndex.upsert``: points, payload, BM25, upsert; no embedding),
with the product's default index and search settings (``docquery.wiring``), then measures
with the ACL filter in place. Vectors are random unit 384-d; text is drawn from a fixed
vocabulary (Zipf, head cut) so BM25 has realistic posting lists; each chunk belongs to one of
10 ACL groups, and 1 in 20 is public.

    .venv/bin/python -m benchmarks.scale --chunks 100000 --json
    .venv/bin/python -m benchmarks.scale --chunks 100000 --qdrant-url http://localhost:6333

With ``--json`` the last line is one JSON object; ``benchmarks/scale_plot.py`` draws the curves
from a file of such lines. The embedded run builds in a temporary directory and removes it; a
server run creates a collection of its own and deletes it at the end. An embedded run also probes
the disk with uncached reads of the collection's largest file before and after the timed queries
(``disk_read_before``, ``disk_read_after``; ``benchmarks/disk_tail.py``): the p99 of a query that
reads its hits from disk follows the disk's tail at that moment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import SecretStr

from benchmarks.disk_tail import largest_file, probe
from benchmarks.synthetic import DIM, TextMaker, percentile, synthetic_chunk, unit_vectors
from docquery.config.settings import Settings
from docquery.core.domain import AclFilter, IndexedChunk
from docquery.core.ports import SearchMode
from docquery.index import IndexTuning, QdrantIndex, open_edge, open_server
from docquery.index.fusion import FusionParams
from docquery.wiring import fusion_params, index_tuning

BATCH = 2000
CALLERS = {"1 group": ("g1",), "3 groups": ("g1", "g2", "g3")}


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_batch(rng: np.random.Generator, text: TextMaker, lo: int, n: int) -> list[IndexedChunk]:
    vecs = unit_vectors(rng, n)
    return [synthetic_chunk(lo + j, body, vecs[j].tolist()) for j, body in enumerate(text.texts(n, 40, 160))]


def rss_mb() -> float:
    """Resident set now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


_WATCH = """
import select, sys
pid, every = sys.argv[1], float(sys.argv[2])
peak = {"VmRSS:": 0, "RssAnon:": 0}
while not select.select([sys.stdin], [], [], every)[0]:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(maxsplit=1)[0]
            if key in peak:
                peak[key] = max(peak[key], int(line.split()[1]))
print(peak["VmRSS:"] / 1024, peak["RssAnon:"] / 1024)
"""


class MemPeak:
    """Peak resident (VmRSS) and anonymous (RssAnon) memory of this process, sampled while it runs.

    RSS also counts the engine's memory-mapped segment files, page cache the kernel can reclaim;
    the anonymous part is what the process really holds. The sampler is a child process: the
    engine holds the GIL through optimize(), so a thread here would not run until it returns.
    """

    def __init__(self, every_s: float = 0.25) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-c", _WATCH, str(os.getpid()), str(every_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def stop(self) -> tuple[float, float]:
        """The peaks (RSS, anonymous) in MB."""
        out, _ = self._child.communicate("")
        rss, anon = (float(x) for x in out.split())
        return rss, anon


def reopen(index: QdrantIndex, open_again: Callable[[], QdrantIndex]) -> QdrantIndex:
    """Close the index, hand the heap the build freed back to the OS (glibc keeps it otherwise, and
    the search phase's anonymous memory would count it), and open the shard again."""
    index.close()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the figure stays an upper bound
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return open_again()


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def build(index: QdrantIndex, n: int, rng: np.random.Generator, text: TextMaker) -> float:
    """Write N chunks; returns the seconds spent in the write path (generation and sealing excluded)."""
    write_s = 0.0
    started = time.monotonic()
    for lo in range(0, n, BATCH):
        items = make_batch(rng, text, lo, min(BATCH, n - lo))
        t0 = time.perf_counter()
        index.upsert(items)
        write_s += time.perf_counter() - t0
        done = lo + len(items)
        if (lo // BATCH) % 25 == 0 or done == n:
            _progress(f"wrote {done}/{n} chunks ({time.monotonic() - started:.0f}s, rss {rss_mb():.0f} MB)")
    t0 = time.perf_counter()
    index.flush()
    # Sealing full segments (the embedded engine's optimize inside upsert) is index building: it
    # counts toward build_s and seal_s, not the write path.
    return write_s + time.perf_counter() - t0 - index.stats().seal_s


Query = tuple[list[float], str]


def major_faults() -> int:
    """Page faults of this process (all threads) that had to read from disk so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt


async def _latency(
    index: QdrantIndex, mode: SearchMode, acl: AclFilter, queries: list[Query], warmup: int
) -> tuple[list[float], list[float], int]:
    """Sorted wall-clock and CPU milliseconds per query, and the major page faults of the timed ones.

    CPU time (all of this process's threads) is what a query costs on an idle core; wall time on a
    busy machine adds the wait for one. A major fault is a read of a segment file that was not in
    the page cache (the on-disk originals and payloads), so a query that waited for the disk.
    """
    for dense, q in queries[:warmup]:
        await index.search(dense=dense, text=q, acl=acl, limit=10, mode=mode)
    wall, cpu = [], []
    faults = major_faults()
    for dense, q in queries[warmup:]:
        t0, c0 = time.perf_counter(), time.process_time()
        await index.search(dense=dense, text=q, acl=acl, limit=10, mode=mode)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - t0) * 1000)
    return sorted(wall), sorted(cpu), major_faults() - faults


async def _recall(index: QdrantIndex, mode: SearchMode, acl: AclFilter, queries: list[Query]) -> float:
    """Share of the exact top 10 (same filter, same fusion, brute-force dense) that the default search finds."""
    found = wanted = 0
    for dense, q in queries:
        approx = await index.search(dense=dense, text=q, acl=acl, limit=10, mode=mode)
        exact = await index.search(dense=dense, text=q, acl=acl, limit=10, mode=mode, exact=True)
        found += len({h.chunk.id for h in approx} & {h.chunk.id for h in exact})
        wanted += len(exact)
    return found / wanted if wanted else 1.0


async def measure(
    index: QdrantIndex, queries: list[Query], *, timed: int, warmup: int, recall_n: int
) -> dict[str, Any]:
    callers: dict[str, Any] = {}
    for caller, groups in CALLERS.items():
        acl = AclFilter.for_groups(set(groups))
        row: dict[str, float] = {}
        for mode in ("hybrid", "dense"):
            times, cpu, faults = await _latency(index, mode, acl, queries[: warmup + timed], warmup)
            row[f"{mode}_p50_ms"] = round(percentile(times, 50), 3)
            row[f"{mode}_p99_ms"] = round(percentile(times, 99), 3)
            row[f"{mode}_cpu_p50_ms"] = round(percentile(cpu, 50), 3)
            row[f"{mode}_cpu_p99_ms"] = round(percentile(cpu, 99), 3)
            row[f"{mode}_major_faults_per_query"] = round(faults / len(times), 2)
            _progress(
                f"{caller} {mode}: p50 {row[f'{mode}_p50_ms']:.2f} ms, p99 {row[f'{mode}_p99_ms']:.2f} ms, "
                f"{row[f'{mode}_major_faults_per_query']} major page faults a query"
            )
        reference = queries[-recall_n:]
        row["hybrid_recall_at_10"] = round(await _recall(index, "hybrid", acl, reference), 4)
        row["dense_recall_at_10"] = round(await _recall(index, "dense", acl, reference), 4)
        _progress(f"{caller} recall@10: hybrid {row['hybrid_recall_at_10']}, dense {row['dense_recall_at_10']}")
        callers[caller] = row
    rows = list(callers.values())
    return {
        # The headline figures are the worse caller's: what a reader should plan for.
        "hybrid_acl_p50_ms": max(r["hybrid_p50_ms"] for r in rows),
        "hybrid_acl_p99_ms": max(r["hybrid_p99_ms"] for r in rows),
        "dense_acl_p50_ms": max(r["dense_p50_ms"] for r in rows),
        "dense_acl_p99_ms": max(r["dense_p99_ms"] for r in rows),
        "hybrid_acl_cpu_p50_ms": max(r["hybrid_cpu_p50_ms"] for r in rows),
        "hybrid_acl_cpu_p99_ms": max(r["hybrid_cpu_p99_ms"] for r in rows),
        "recall_at_10": min(r["hybrid_recall_at_10"] for r in rows),
        "dense_recall_at_10": min(r["dense_recall_at_10"] for r in rows),
        "callers": callers,
    }


def _wait_server_indexed(index_info: Callable[[], tuple[str, int, int]], timeout_s: float) -> None:
    """A server optimizes on its own: wait until the collection reports green with every vector indexed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, points, indexed = index_info()
        if status == "green":
            return
        _progress(f"server: {status}, {indexed} vectors indexed of {points} points")
        time.sleep(2)


def _open_server(
    args: argparse.Namespace, name: str, fusion: FusionParams, tuning: IndexTuning
) -> tuple[Any, QdrantIndex]:
    from qdrant_client import QdrantClient

    key = os.environ.get("DOCQUERY_QDRANT__API_KEY")
    client = QdrantClient(url=args.qdrant_url, api_key=key, check_compatibility=False, timeout=60)
    index = open_server(
        url=args.qdrant_url,
        name=name,
        model_id=args.model_id,
        dimension=DIM,
        fusion=fusion,
        tuning=tuning,
        client=client,
        api_key=(lambda: SecretStr(key)) if key else None,
    )
    return client, index


def _disk_probe(shard: Path | None, seconds: float) -> dict[str, float] | None:
    """Uncached reads of the shard's largest file (benchmarks/disk_tail.py); None for a server or when off."""
    target = None if shard is None or seconds <= 0 else largest_file(shard)
    found = None if target is None else probe(target, seconds)
    if found is not None:
        _progress(
            f"disk, uncached 4 KiB reads: {found['reads_per_s']:.0f}/s, p50 {found['p50_ms']:.2f} ms, "
            f"p99.9 {found['p999_ms']:.1f} ms, max {found['max_ms']:.1f} ms"
        )
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    tuning = index_tuning(settings)
    fusion = fusion_params(settings)
    rng = np.random.default_rng(args.seed)
    text = TextMaker(rng)
    load_before = os.getloadavg()
    build_mem = MemPeak()
    opts: dict[str, Any] = {"dimension": DIM, "fusion": fusion, "tuning": tuning}
    tmp = Path(tempfile.mkdtemp(prefix="docquery-scale-"))
    client: Any = None
    name = f"docquery-scale-{uuid.uuid4().hex[:8]}"
    # --keep: the collection stays, as a data dir DocQuery can open (an incremental `docquery ingest` into it).
    shard = args.keep / "collections" / "scale" if args.keep else tmp / "shard"
    try:
        if args.qdrant_url:
            client, index = _open_server(args, name, fusion, tuning)
        else:
            index = open_edge(shard, name="scale", model_id=args.model_id, **opts)
        t0 = time.monotonic()
        write_s = build(index, args.chunks, rng, text)
        t_opt = time.monotonic()
        _progress(f"optimizing (HNSW, {tuning.quantization} quantized vectors, payload-indexed segments)")
        index.optimize()
        if client is not None:

            def info() -> tuple[str, int, int]:
                c = client.get_collection(name)
                return str(c.status.value), int(c.points_count or 0), int(c.indexed_vectors_count or 0)

            _wait_server_indexed(info, timeout_s=3600)
        optimize_s = time.monotonic() - t_opt
        build_peak = build_mem.stop()
        built = index.stats()
        if client is None:
            # `docquery ingest` and `docquery serve` are separate processes (a shard opens in one
            # at a time): search a freshly opened shard, as the service does after an ingest.
            index = reopen(index, lambda: open_edge(shard, name="scale", model_id=args.model_id, **opts))
        build_s = time.monotonic() - t0
        _progress(f"searchable after {build_s:.0f}s (write {write_s:.0f}s, optimize {optimize_s:.0f}s)")
        serve_mem = MemPeak()
        qv = unit_vectors(rng, args.warmup + args.queries)
        qt = text.texts(args.warmup + args.queries, 3, 9)
        queries = [(qv[i].tolist(), qt[i]) for i in range(len(qt))]
        rss_built = rss_mb()
        disk_before = _disk_probe(shard if client is None else None, args.disk_probe_s)
        found = asyncio.run(
            measure(index, queries, timed=args.queries, warmup=args.warmup, recall_n=args.recall_queries)
        )
        serve_peak = serve_mem.stop()
        disk_after = _disk_probe(shard if client is None else None, args.disk_probe_s)
        index.close()
        size = disk_mb(shard) if client is None else None
    finally:
        if client is not None:
            client.delete_collection(name)
            client.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "chunks": args.chunks,
        "backend": "server" if args.qdrant_url else "edge",
        **{k: v for k, v in found.items() if k != "callers"},
        "write_chunks_per_s": round(args.chunks / write_s, 1),
        "build_s": round(build_s, 1),
        "write_s": round(write_s, 1),
        "optimize_s": round(optimize_s, 1),
        "seal_s": round(built.seal_s, 1),
        "segments": built.segments,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "peak_anon_mb": round(max(build_peak[1], serve_peak[1]), 1),
        "build_peak_rss_mb": round(build_peak[0], 1),
        "build_peak_anon_mb": round(build_peak[1], 1),
        "serve_peak_rss_mb": round(serve_peak[0], 1),
        "serve_peak_anon_mb": round(serve_peak[1], 1),
        "rss_after_build_mb": round(rss_built, 1),
        "disk_mb": None if size is None else round(size, 1),
        # The disk's own tail around the timed queries: a run's p99 is to be read against it.
        "disk_read_before": disk_before,
        "disk_read_after": disk_after,
        "callers": found["callers"],
        "queries": args.queries,
        "recall_queries": args.recall_queries,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "tuning": asdict(tuning),
        "fusion": asdict(fusion),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, required=True, help="collection size N")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    ap.add_argument("--qdrant-url", help="run against a Qdrant server instead of the embedded engine")
    ap.add_argument("--queries", type=int, default=1000, help="timed queries per caller and mode")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--recall-queries", type=int, default=200, help="queries compared with exact search")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--disk-probe-s",
        type=float,
        default=5.0,
        help="seconds of uncached disk reads before and after the timed queries (0: none)",
    )
    ap.add_argument("--keep", type=Path, help="build in DATA_DIR/collections/scale and keep it (embedded only)")
    ap.add_argument("--model-id", default="synthetic", help="model id recorded in the collection (with --keep)")
    args = ap.parse_args(argv)
    if args.chunks < 1 or args.queries < 1 or not 1 <= args.recall_queries <= args.warmup + args.queries:
        ap.error("--chunks and --queries must be positive, --recall-queries at most --warmup + --queries")
    if args.keep and (args.qdrant_url or (args.keep / "collections" / "scale").exists()):
        ap.error("--keep needs the embedded engine and a data dir without a collection 'scale'")
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
