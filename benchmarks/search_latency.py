"""Search latency of the embedded Edge index at 100k chunks, with an ACL filter.

Synthetic data, so the real embedder never runs: random unit 384-d vectors, and
chunk text drawn from a fixed vocabulary (Zipf-like, 40-160 words, head cut as
stopwords would be) so BM25 has realistic posting lists. Every chunk gets one of ``--groups`` ACL groups (a few
are public). Queries run through ``QdrantIndex.search`` on the Edge engine, the service's call: BM25
query encoding, the ACL filter inside each prefetch and the fused query, payload
decoding and hit building are all inside the timing.

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

from docquery.core.collection import PUBLIC_GROUP, chunk_point_id
from docquery.core.domain import AclFilter, Chunk, IndexedChunk
from docquery.core.ports import SearchMode
from docquery.index import FusionParams, QdrantIndex, open_edge

DIM = 384


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(size)]


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def word_distribution(size: int) -> np.ndarray:
    """Zipf over the vocabulary minus its 50 most frequent ranks: BM25 drops stopwords, and
    random letter strings are not on its list, so the head of the curve is cut here instead."""
    zipf = 1.0 / np.arange(51, size + 51)
    return zipf / zipf.sum()


def build(index: QdrantIndex, n: int, groups: int, rng: np.random.Generator, vocab: list[str]) -> None:
    zipf = word_distribution(len(vocab))
    labels = [f"g{i}" for i in range(groups)]
    batch = 2000
    started = time.monotonic()
    for lo in range(0, n, batch):
        m = min(batch, n - lo)
        vecs = unit(rng, m)
        items = []
        for j in range(m):
            i = lo + j
            words = rng.choice(len(vocab), size=int(rng.integers(40, 160)), p=zipf)
            text = " ".join(vocab[w] for w in words)
            # 1 in 20 chunks is public; the rest are spread over the groups.
            group = PUBLIC_GROUP if i % 20 == 0 else labels[i % groups]
            doc_id = f"doc{i // 4}"
            chunk = Chunk(
                id=chunk_point_id(doc_id, "sha", i % 4),
                doc_id=doc_id,
                source=f"{doc_id}.txt",
                title=doc_id,
                chunk_index=i % 4,
                text=text,
                content_sha256="sha",
                acl_groups=(group,),
            )
            items.append(IndexedChunk(chunk=chunk, dense=vecs[j].tolist()))
        index.upsert(items)
        if (lo // batch) % 10 == 0:
            print(f"ingested {lo + m}/{n} ({time.monotonic() - started:.0f}s)", file=sys.stderr, flush=True)
    index.flush()


def percentile(sorted_ms: list[float], p: float) -> float:
    k = (len(sorted_ms) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (k - lo)


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
    vocab = vocabulary(rng, args.vocab)
    fusion = FusionParams()
    with tempfile.TemporaryDirectory(prefix="docquery-latency-") as tmp:
        index = open_edge(Path(tmp) / "shard", name="latency", model_id="synthetic", dimension=DIM, fusion=fusion)
        t0 = time.monotonic()
        build(index, args.points, args.groups, rng, vocab)
        build_s = time.monotonic() - t0
        qv = unit(rng, args.queries + args.warmup)
        zipf = word_distribution(len(vocab))
        queries = [
            (qv[i].tolist(), " ".join(vocab[w] for w in rng.choice(len(vocab), size=int(rng.integers(3, 9)), p=zipf)))
            for i in range(args.queries + args.warmup)
        ]
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
                    r = asyncio.run(measure(index, mode, acl, queries, limit=args.limit, warmup=args.warmup))  # type: ignore[arg-type]
                    print(
                        f"| {mode} | {caller} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | "
                        f"{r['mean']:.2f} | {r['qps']:.0f} | {r['hits']:.1f} |",
                        flush=True,
                    )
        index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
