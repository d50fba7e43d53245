"""Fusion tuning on a BEIR split (train only, for SciFact).

The corpus is chunked, embedded (cached) and ingested once into a temporary Edge
shard. Each query then runs once per branch through ``QdrantIndex.search`` (dense,
sparse; ACL filter on; 200 chunks each, as ``docquery eval retrieval`` fetches),
and every fusion setting is computed from those two ranked lists with the
engine's formulas:

* RRF: ``sum w / (rank + w * (k - 1))`` (1-based rank; Qdrant's weighted RRF);
* DBSF: each list normalised by ``mean +- 3 sigma``, then summed;
* convex: ``docquery.index.fusion.fuse_convex`` (the product's own code).

Edge and qdrant-client local mode agree on RRF and DBSF
(tests/integration/test_index_contract.py), and local mode implements exactly
these formulas. The chosen setting is then re-measured end to end with
``docquery eval retrieval`` (docs/benchmarks.md).

    .venv/bin/python benchmarks/retrieval_eval.py $SCIFACT_DIR \\
        --split train --cache /tmp/dq-eval-cache
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docquery.chunking import ChunkSpec, tokenizer_for
from docquery.core.domain import AclFilter
from docquery.embedders.local import LocalEmbedder
from docquery.evaluation.beir import load_beir
from docquery.evaluation.cache import embed_all
from docquery.evaluation.metrics import evaluate
from docquery.evaluation.progress import LineProgress
from docquery.evaluation.runner import EVAL_GROUP, chunk_corpus, ingest
from docquery.index import open_edge
from docquery.index.fusion import fuse_convex

FETCH = 200  # chunks per branch, as the eval command's search (2 x depth 100)
Ranked = list[tuple[str, float]]  # (chunk id, score), best first


def rrf(k: int, dense_weight: float) -> Callable[[Ranked, Ranked], dict[str, float]]:
    def fuse(dense: Ranked, sparse: Ranked) -> dict[str, float]:
        out: dict[str, float] = {}
        for ranked, w in ((dense, dense_weight), (sparse, 1.0)):
            for i, (cid, _) in enumerate(ranked):
                out[cid] = out.get(cid, 0.0) + 1.0 / ((i + 1) / w + k - 1)
        return out

    return fuse


def dbsf(dense: Ranked, sparse: Ranked) -> dict[str, float]:
    out: dict[str, float] = {}
    for ranked in (dense, sparse):
        if not ranked:
            continue
        scores = [s for _, s in ranked]
        if len(scores) == 1:
            norm = [0.5]
        else:
            mean, sd = statistics.fmean(scores), statistics.stdev(scores)
            norm = [0.5] * len(scores) if sd == 0 else [(s - (mean - 3 * sd)) / (6 * sd) for s in scores]
        for (cid, _), v in zip(ranked, norm, strict=True):
            out[cid] = out.get(cid, 0.0) + v
    return out


def convex(share: float) -> Callable[[Ranked, Ranked], dict[str, float]]:
    def fuse(dense: Ranked, sparse: Ranked) -> dict[str, float]:
        return dict(fuse_convex(dict(dense), dict(sparse), share, FETCH))

    return fuse


def settings_grid() -> list[tuple[str, Callable[[Ranked, Ranked], dict[str, float]]]]:
    grid: list[tuple[str, Callable[[Ranked, Ranked], dict[str, float]]]] = [
        ("dense only", lambda d, s: dict(d)),
        ("sparse only", lambda d, s: dict(s)),
    ]
    for k in (5, 10, 20, 30, 60, 100):
        for w in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
            grid.append((f"rrf k={k} dense_weight={w}", rrf(k, w)))
    grid.append(("dbsf", dbsf))
    for share in (0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7):
        grid.append((f"convex dense_share={share}", convex(share)))
    # Shallower prefetch (the service's default is 50): score-based fusions normalise over the fetched list.
    for fetch in (50, 100):
        grid.append((f"dbsf prefetch={fetch}", shallow(dbsf, fetch)))
        grid.append((f"convex dense_share=0.45 prefetch={fetch}", shallow(convex(0.45), fetch)))
        grid.append((f"rrf k=10 dense_weight=1.0 prefetch={fetch}", shallow(rrf(10, 1.0), fetch)))
    return grid


def shallow(
    fuse: Callable[[Ranked, Ranked], dict[str, float]], fetch: int
) -> Callable[[Ranked, Ranked], dict[str, float]]:
    return lambda dense, sparse: fuse(dense[:fetch], sparse[:fetch])


def to_run(fused_by_query: dict[str, dict[str, float]], doc_of: dict[str, str]) -> dict[str, dict[str, float]]:
    """Chunk scores -> document scores (best chunk), top 100 documents."""
    run: dict[str, dict[str, float]] = {}
    for qid, fused in fused_by_query.items():
        docs: dict[str, float] = {}
        for cid, score in fused.items():
            d = doc_of[cid]
            if score > docs.get(d, -math.inf):
                docs[d] = score
        run[qid] = dict(sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:100])
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--whole-documents", action="store_true", help="one chunk per document (truncated)")
    ap.add_argument("--bm25", default=None, help="K,B,AVG_LEN: try another BM25 document weighting (research)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)

    progress = LineProgress(sys.stderr)
    embedder = LocalEmbedder()
    dataset = load_beir(args.dataset_dir, args.split)
    chunks = chunk_corpus(dataset, tokenizer_for(embedder), None if args.whole_documents else ChunkSpec())
    texts = [c.text for c in chunks]
    vectors = embed_all(embedder, texts, query=False, label="corpus", progress=progress, cache_dir=args.cache)
    qids = list(dataset.queries)
    qvecs = embed_all(
        embedder,
        list(dataset.queries.values()),
        query=True,
        label=f"queries-{args.split}",
        progress=progress,
        cache_dir=args.cache,
    )
    acl = AclFilter.for_groups({EVAL_GROUP})
    branches: dict[str, dict[str, Ranked]] = {"dense": {}, "sparse": {}}
    doc_of: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="docquery-tune-") as tmp:
        index = open_edge(Path(tmp) / "shard", name="tune", model_id=embedder.model_id, dimension=embedder.dimension)
        try:
            if args.bm25:
                from qdrant_edge import Bm25, Bm25Config

                k, b, avg = (float(x) for x in args.bm25.split(","))
                index._search.bm25 = Bm25(Bm25Config(k=k, b=b, avg_len=avg))  # research only: not the product encoder
            ingest(index, chunks, vectors, progress)
            for mode in ("dense", "sparse"):
                progress.start(f"search {mode}", len(qids))
                for i, qid in enumerate(qids):
                    hits = asyncio.run(
                        index.search(
                            dense=qvecs[i].tolist(), text=dataset.queries[qid], acl=acl, limit=FETCH, mode=mode
                        )
                    )
                    branches[mode][qid] = [(h.chunk.id, h.score) for h in hits]
                    doc_of.update((h.chunk.id, h.chunk.doc_id) for h in hits)
                    progress.advance()
                progress.finish()
        finally:
            index.close()

    rows: list[dict[str, Any]] = []
    print(f"{args.split} split, {len(qids)} queries, {len(chunks)} chunks, bm25={args.bm25 or 'default'}")
    print("| setting | nDCG@10 | Recall@10 | Recall@100 | MRR@10 |\n|---|---:|---:|---:|---:|")
    for label, fuse in settings_grid():
        fused = {q: fuse(branches["dense"][q], branches["sparse"][q]) for q in qids}
        m = evaluate(to_run(fused, doc_of), dataset.qrels)
        rows.append({"setting": label, **m})
        print(f"| {label} | {m['ndcg@10']:.4f} | {m['recall@10']:.4f} | {m['recall@100']:.4f} | {m['mrr@10']:.4f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
