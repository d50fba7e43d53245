"""Search latency of the embedded Edge index at 100k chunks, with an ACL filter.

Synthetic data (``benchmarks/synthetic.py``, the corpus ``scale.py`` uses too), so the real
embedder never runs: random unit 384-d vectors, and chunk text of 40-160 words drawn from a
fixed vocabulary. Every chunk gets one of ``--groups`` ACL groups (1 in 20 is public). Queries
run through ``QdrantIndex.search`` on the Edge engine, the service's call: BM25 query encoding,
the ACL filter inside each prefetch and the fused query, payload decoding and hit building are
all inside the timing.

    .venv/bin/python benchmarks/search_latency.py --points 100000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic import DIM, TextMaker, percentile, synthetic_chunk, unit_vectors
from docquery.core.domain import AclFilter
from docquery.core.ports import SearchMode
from docquery.index import FusionParams, QdrantIndex, open_edge


def build(index: QdrantIndex, n: int, groups: int, rng: np.random.Generator, text: TextMaker) -> None:
    batch = 2000
    started = time.monotonic()
    for lo in range(0, n, batch):
        m = min(batch, n - lo)
        vecs = unit_vectors(rng, m)
        index.upsert([synthetic_chunk(lo + j, text.text(40, 160), vecs[j].tolist(), groups) for j in range(m)])
        if (lo // batch) % 10 == 0:
            print(f"ingested {lo + m}/{n} ({time.monotonic() - started:.0f}s)", file=sys.stderr, flush=True)
    index.flush()


def make_queries(rng: np.random.Generator, text: TextMaker, n: int) -> tuple[np.ndarray, list[str]]:
    """``n`` query vectors, then ``n`` query texts of 3 to 8 words."""
    qv = unit_vectors(rng, n)
    return qv, [text.text(3, 9) for _ in range(n)]


async def measure(
    index: QdrantIndex,
    mode: SearchMode,
    acl: AclFilter,
    queries: list[tuple[list[float], str]],
    *,
    limit: int,
    warmup: int,
) -> dict[str, float]:
    for dense, text in queries[:warmup]:
        await index.search(dense=dense, text=text, acl=acl, limit=limit, mode=mode)
    times: list[float] = []
    n_hits = 0
    for dense, text in queries[warmup:]:
        t0 = time.perf_counter()
        hits = await index.search(dense=dense, text=text, acl=acl, limit=limit, mode=mode)
        times.append((time.perf_counter() - t0) * 1000)
        n_hits += len(hits)
    times.sort()
    return {
        "p50": percentile(times, 50),
        "p95": percentile(times, 95),
        "p99": percentile(times, 99),
        "mean": statistics.fmean(times),
        "qps": 1000 / statistics.fmean(times),
        "hits": n_hits / len(times),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--vocab", type=int, default=20_000)
    ap.add_argument("--optimize", action="store_true", help="also measure after QdrantIndex.optimize() (HNSW)")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    text = TextMaker(rng, args.vocab)
    fusion = FusionParams()
    with tempfile.TemporaryDirectory(prefix="docquery-latency-") as tmp:
        index = open_edge(Path(tmp) / "shard", name="latency", model_id="synthetic", dimension=DIM, fusion=fusion)
        t0 = time.monotonic()
        build(index, args.points, args.groups, rng, text)
        build_s = time.monotonic() - t0
        qv, qt = make_queries(rng, text, args.queries + args.warmup)
        pairs = [(qv[i].tolist(), qt[i]) for i in range(len(qt))]
        callers = {
            "1 group": AclFilter.for_groups({"g1"}),
            "3 groups": AclFilter.for_groups({"g1", "g2", "g3"}),
        }
        rounds = [("plain segments", False)]
        if args.optimize:
            rounds.append(("after optimize()", True))
        print(
            f"# {args.points} chunks, {args.groups} groups + public, dim {DIM}, limit {args.limit}, "
            f"fusion {fusion.method} (prefetch {fusion.prefetch_limit}), ingest {build_s:.0f}s"
        )
        for title, optimize in rounds:
            if optimize:
                t0 = time.monotonic()
                index.optimize()
                print(f"# optimize() took {time.monotonic() - t0:.0f}s")
            print(f"\n{title}\n")
            print("| mode | caller | p50 ms | p95 ms | p99 ms | mean ms | qps (1 thread) | hits |")
            print("|---|---|---:|---:|---:|---:|---:|---:|")
            for mode in ("dense", "hybrid", "sparse"):
                for caller, acl in callers.items():
                    r = asyncio.run(measure(index, mode, acl, pairs, limit=args.limit, warmup=args.warmup))  # type: ignore[arg-type]
                    print(
                        f"| {mode} | {caller} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | "
                        f"{r['mean']:.2f} | {r['qps']:.0f} | {r['hits']:.1f} |",
                        flush=True,
                    )
        index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
