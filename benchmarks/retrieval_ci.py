"""How far a retrieval figure can move by the choice of queries: bootstrap intervals for nDCG@10.

Runs ``docquery eval retrieval``'s own code (``run_eval``, default settings, the product's chunking)
and, for a paired comparison, the same with one chunk per document (``--whole-documents``). The
queries are resampled with replacement; each resample's mean gives the interval, and the same
resamples give the paired difference of the two setups. Figures in docs/benchmarks.md.

    .venv/bin/python benchmarks/retrieval_ci.py $SCIFACT_DIR --split test --mode hybrid \\
        --cache /tmp/dq-eval-cache --target 0.735
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from docquery.chunking import ChunkSpec  # noqa: E402
from docquery.config.settings import Settings  # noqa: E402
from docquery.evaluation.progress import default_progress  # noqa: E402
from docquery.evaluation.runner import EvalConfig, EvalResult, run_eval  # noqa: E402
from docquery.runtime.logs import configure_logging, resolve_format  # noqa: E402
from docquery.wiring import build_embedder, fusion_params  # noqa: E402

METRIC = "ndcg@10"


def interval(values: np.ndarray, draws: np.ndarray) -> tuple[float, float, float]:
    """Mean and the 2.5th / 97.5th percentiles of the resampled means."""
    means = values[draws].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--split", default="test")
    ap.add_argument("--mode", default="hybrid", choices=("dense", "sparse", "hybrid"))
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--target", type=float, default=None, help="a figure to compare the product setup against")
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    settings = Settings()
    # Off a terminal the progress is log lines (docquery/evaluation/progress.py): they need a handler.
    configure_logging(settings.log_level, resolve_format(settings.log_format, stream=sys.stderr, prefer_json=False))
    embedder = build_embedder(settings)
    setups = {
        "product chunking": ChunkSpec(settings.ingest.chunk_tokens, settings.ingest.chunk_overlap),
        "one chunk per document": None,
    }
    results: dict[str, EvalResult] = {}
    for name, spec in setups.items():
        config = EvalConfig(mode=args.mode, split=args.split, chunks=spec, cache_dir=args.cache)
        results[name] = run_eval(
            args.dataset_dir, embedder, config, fusion=fusion_params(settings), progress=default_progress()
        )

    queries = sorted(next(iter(results.values())).per_query)
    values = {n: np.array([r.per_query[q][METRIC] for q in queries]) for n, r in results.items()}
    draws = np.random.default_rng(args.seed).integers(0, len(queries), size=(args.resamples, len(queries)))

    print(f"\n{args.mode}, {args.split} split, {len(queries)} judged queries, {args.resamples:,} resamples\n")
    print(f"| setup | {METRIC} | 95 % interval |")
    print("|---|---:|---|")
    summary: dict[str, object] = {"mode": args.mode, "split": args.split, "queries": len(queries)}
    for name, v in values.items():
        mean, lo, hi = interval(v, draws)
        print(f"| {name} | {mean:.4f} | {lo:.4f} to {hi:.4f} |")
        summary[name] = {"mean": round(mean, 4), "ci95": [round(lo, 4), round(hi, 4)]}
    a, b = values["product chunking"], values["one chunk per document"]
    mean, lo, hi = interval(a - b, draws)
    print(f"| difference (product - one chunk per document), paired | {mean:+.4f} | {lo:+.4f} to {hi:+.4f} |")
    summary["paired_difference"] = {"mean": round(mean, 4), "ci95": [round(lo, 4), round(hi, 4)]}
    if args.target is not None:
        below = float((a[draws].mean(axis=1) < args.target).mean())
        print(f"\nResamples whose product-chunking mean is below {args.target}: {100 * below:.1f} %")
        summary["share_below_target"] = round(below, 4)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
