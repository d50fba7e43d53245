"""A hybrid's dense prefetch rescored at its depth, against one oversampled in full.

The service's hybrid query fuses a dense and a BM25 prefetch of 100 for a top 10. With
``DOCQUERY_QDRANT__OVERSAMPLING`` 2 the dense prefetch used to rescore 200 candidates per segment
on the original vectors; ``IndexTuning.rescoring`` now rescores 100, since the top 10 needs only
``10 x 2`` of them exact. This script measures what that changes, on the two corpora at hand:

* ``scifact DATASET_DIR``: real embeddings (the bundled model, BEIR SciFact, chunked as ingest does).
  Each query of the split runs as the service runs it (hybrid, limit 10, ACL filter) under both
  rules and as an exact search; prints the share of the top 10 both rules agree on, each rule's
  recall@10 against the exact search and its nDCG@10 (documents by their best chunk).
* ``latency KEEP_DIR``: a collection ``benchmarks/scale.py --keep`` left. Blocks of queries through
  ``QdrantIndex.search``, the two rules alternated block by block in one process; prints wall and
  CPU p50/p99 per caller and the share of the top 10 both rules agree on.

    .venv/bin/python benchmarks/prefetch_rescoring.py scifact $SCIFACT_DIR --split train \\
        --cache /tmp/dq-eval-cache
    .venv/bin/python benchmarks/prefetch_rescoring.py latency /tmp/scale1m/keep --queries 600
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scale import CALLERS
from benchmarks.synthetic import DIM, TextMaker, percentile, unit_vectors
from docquery.chunking import ChunkSpec, tokenizer_for
from docquery.config.settings import Settings
from docquery.core.domain import AclFilter
from docquery.index import QdrantIndex, open_edge
from docquery.index.tuning import IndexTuning
from docquery.wiring import fusion_params, index_tuning

LIMIT = 10  # the service's top k


@dataclass(frozen=True)
class FullRescoring(IndexTuning):
    """The rule before: every dense search oversampled in full, whatever its depth."""

    def rescoring(self, *, depth: int, wanted: int) -> float:
        return self.oversampling


def rules(settings: Settings) -> dict[str, IndexTuning]:
    tuning = index_tuning(settings)
    return {"at depth": tuning, "in full": FullRescoring(**vars(tuning))}


def use(index: QdrantIndex, tuning: IndexTuning) -> None:
    """Search-time parameters are built per request from the engine's tuning: swap it (benchmark only)."""
    index._engine._tuning = tuning  # type: ignore[attr-defined]


def agreement(a: list[set[str]], b: list[set[str]]) -> float:
    return sum(len(x & y) for x, y in zip(a, b, strict=True)) / max(1, sum(len(y) for y in b))


def scifact(args: argparse.Namespace) -> None:
    from docquery.embedders.local import LocalEmbedder
    from docquery.evaluation.beir import load_beir
    from docquery.evaluation.cache import embed_all
    from docquery.evaluation.metrics import evaluate
    from docquery.evaluation.progress import LineProgress
    from docquery.evaluation.runner import EVAL_GROUP, chunk_corpus, ingest

    settings = Settings()
    progress = LineProgress(sys.stderr)
    embedder = LocalEmbedder()
    dataset = load_beir(args.dataset, args.split)
    chunks = chunk_corpus(dataset, tokenizer_for(embedder), ChunkSpec())
    vectors = embed_all(embedder, [c.text for c in chunks], query=False, label="corpus", progress=progress,
                        cache_dir=args.cache)  # fmt: skip
    qids = list(dataset.queries)
    qvecs = embed_all(embedder, list(dataset.queries.values()), query=True, label=f"queries-{args.split}",
                      progress=progress, cache_dir=args.cache)  # fmt: skip
    acl = AclFilter.for_groups({EVAL_GROUP})
    tops: dict[str, list[set[str]]] = {}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="docquery-rescoring-") as tmp:
        index = open_edge(Path(tmp) / "shard", name="r", model_id=embedder.model_id, dimension=embedder.dimension,
                          fusion=fusion_params(settings), tuning=index_tuning(settings))  # fmt: skip
        try:
            ingest(index, chunks, vectors, progress)
            index.optimize()
            for name, tuning in [*rules(settings).items(), ("exact", index_tuning(settings))]:
                use(index, tuning)
                tops[name], runs[name] = [], {}
                for i, qid in enumerate(qids):
                    hits = asyncio.run(index.search(dense=qvecs[i].tolist(), text=dataset.queries[qid], acl=acl,
                                                    limit=LIMIT, exact=name == "exact"))  # fmt: skip
                    tops[name].append({h.chunk.id for h in hits})
                    docs: dict[str, float] = {}
                    for h in hits:
                        docs[h.chunk.doc_id] = max(h.score, docs.get(h.chunk.doc_id, -1e9))
                    runs[name][qid] = docs
        finally:
            index.close()
    print(f"SciFact {args.split}: {len(qids)} queries, {len(chunks)} chunks, hybrid, limit {LIMIT}")
    print(f"top 10 the two rules agree on: {agreement(tops['at depth'], tops['in full']):.4f}")
    print("| rule | recall@10 against exact | nDCG@10 |\n|---|---:|---:|")
    for name in ("at depth", "in full", "exact"):
        ndcg = evaluate(runs[name], dataset.qrels)["ndcg@10"]
        print(f"| {name} | {agreement(tops[name], tops['exact']):.4f} | {ndcg:.4f} |")


def latency(args: argparse.Namespace) -> None:
    settings = Settings()
    chosen = rules(settings)
    index = open_edge(args.keep / "collections" / "scale", name="scale", model_id=args.model_id, dimension=DIM,
                      fusion=fusion_params(settings), tuning=index_tuning(settings))  # fmt: skip
    text = TextMaker(np.random.default_rng(args.seed))  # the collection's vocabulary
    text.rng = np.random.default_rng(args.seed + 2000)  # queries of their own
    n = args.warmup + args.queries
    qv, qt = unit_vectors(text.rng, n), text.texts(n, 3, 9)

    async def one(acl: AclFilter, i: int) -> tuple[float, float, set[str]]:
        t0, c0 = time.perf_counter(), time.process_time()
        hits = await index.search(dense=qv[i].tolist(), text=qt[i], acl=acl, limit=LIMIT, mode="hybrid")
        return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000, {h.chunk.id for h in hits}

    async def run() -> None:
        print(f"| caller | rule | wall p50 ms | wall p99 ms | CPU p50 ms | top 10 as {list(chosen)[1]!r} |")
        print("|---|---|---:|---:|---:|---:|")
        for caller, groups in CALLERS.items():
            acl = AclFilter.for_groups(set(groups))
            wall: dict[str, list[float]] = {k: [] for k in chosen}
            cpu: dict[str, list[float]] = {k: [] for k in chosen}
            tops: dict[str, dict[int, set[str]]] = {k: {} for k in chosen}
            for tuning in chosen.values():
                use(index, tuning)
                for i in range(args.warmup):
                    await one(acl, i)
            order = list(chosen)
            for b, lo in enumerate(range(args.warmup, n, args.block)):
                for name in order if b % 2 == 0 else order[::-1]:
                    use(index, chosen[name])
                    for i in range(lo, min(lo + args.block, n)):
                        w, c, top = await one(acl, i)
                        wall[name].append(w)
                        cpu[name].append(c)
                        tops[name][i] = top
            reference = [tops[order[1]][i] for i in sorted(tops[order[1]])]
            for name in order:
                w = sorted(wall[name])
                same = agreement([tops[name][i] for i in sorted(tops[name])], reference)
                print(f"| {caller} | {name} | {percentile(w, 50):.2f} | {percentile(w, 99):.2f} | "
                      f"{statistics.median(cpu[name]):.2f} | {same:.4f} |")  # fmt: skip

    try:
        asyncio.run(run())
    finally:
        index.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("scifact", help="real embeddings: agreement, recall against exact, nDCG@10")
    s.add_argument("dataset", type=Path)
    s.add_argument("--split", default="train")
    s.add_argument("--cache", type=Path, default=None, help="directory for cached embeddings")
    lat = sub.add_parser("latency", help="a kept scale collection: the two rules alternated")
    lat.add_argument("keep", type=Path, help="the --keep DIR of benchmarks/scale.py")
    lat.add_argument("--queries", type=int, default=600, help="timed queries per caller and rule")
    lat.add_argument("--warmup", type=int, default=50)
    lat.add_argument("--block", type=int, default=25, help="queries per block; the rules alternate by block")
    lat.add_argument("--seed", type=int, default=42, help="the collection's seed (for its vocabulary)")
    lat.add_argument("--model-id", default="sentence-transformers/all-MiniLM-L6-v2", help="as given to scale.py")
    args = ap.parse_args(argv)
    if args.what == "scifact":
        scifact(args)
    else:
        latency(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
