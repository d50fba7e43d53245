"""``docquery eval retrieval DATASET_DIR``: the command face of ``docquery.evaluation.runner.run_eval``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docquery import validation
from docquery.core.exits import ExitCode

if TYPE_CHECKING:
    from docquery.config.settings import Settings
    from docquery.evaluation.progress import Progress
    from docquery.evaluation.runner import EvalResult


def register(sub: Any) -> None:
    """Adds ``eval retrieval`` to the ``docquery`` subcommands."""
    ev = sub.add_parser("eval", help="evaluate the service's components")
    ev_sub = ev.add_subparsers(dest="eval_command", required=True)
    ret = ev_sub.add_parser("retrieval", help="nDCG@10, Recall@10/100 and MRR@10 on a BEIR-layout dataset")
    ret.add_argument("dataset_dir", type=Path, help="directory with corpus.jsonl, queries.jsonl and qrels/")
    ret.add_argument("--mode", choices=("dense", "sparse", "hybrid"), default=None,
                     help="search mode (default: the configured retrieval mode, hybrid)")  # fmt: skip
    ret.add_argument("--split", choices=("test", "train", "dev"), default="test", help="qrels split (default test)")
    ret.add_argument("--cache", type=Path, default=None, help="directory for cached embeddings (.npy)")
    ret.add_argument(
        "--whole-documents",
        action="store_true",
        help="one chunk per document, truncated by the model, as the published baselines do "
        "(default: chunk as ingest does, with DOCQUERY_INGEST__CHUNK_TOKENS/CHUNK_OVERLAP)",
    )
    ret.add_argument("--json", action="store_true", help="print one JSON object")
    ret.set_defaults(handler=cmd_eval_retrieval)


def cmd_eval_retrieval(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: numpy and the engine load only when this command runs.
    from docquery.evaluation.beir import check_layout
    from docquery.evaluation.progress import RichProgress, default_progress
    from docquery.evaluation.runner import EvalConfig, run_eval
    from docquery.runtime.kernel_caches import bound_kernel_caches
    from docquery.runtime.malloc import tune_for_bulk_embedding
    from docquery.wiring import build_embedder, fusion_params, index_tuning

    # Input and settings first: loading the model takes seconds to minutes, a typo must not wait for it.
    check_layout(args.dataset_dir, args.split)
    spec = None if args.whole_documents else validation.chunk_spec(settings)
    bound_kernel_caches()  # before the model's first pass, when torch reads the bound
    if settings.embedder.tune_malloc:
        tune_for_bulk_embedding()  # before the embedder starts its workers (docquery/runtime/malloc.py)
    embedder = build_embedder(settings)
    config = EvalConfig(mode=args.mode or settings.retrieval.mode, split=args.split, chunks=spec, cache_dir=args.cache)
    # stderr: a bar on a terminal, log lines (the log format) otherwise; stdout stays clean for --json.
    progress: Progress = default_progress()
    try:
        result = run_eval(
            args.dataset_dir,
            embedder,
            config,
            fusion=fusion_params(settings),
            tuning=index_tuning(settings),
            progress=progress,
        )
    finally:
        if isinstance(progress, RichProgress):
            progress.close()
    if args.json:
        sys.stdout.write(json.dumps(result.as_json()) + "\n")
    else:
        sys.stdout.write(format_table(result))
    return ExitCode.OK


def format_table(result: EvalResult) -> str:
    from docquery.evaluation.metrics import METRIC_KEYS

    lines = [
        f"retrieval on {result.split} split, mode {result.mode}: {result.n_queries} queries, "
        f"{result.n_docs} documents, {result.n_chunks} chunks, {result.seconds:.0f}s",
    ]
    lines += [f"  {key:<11} {result.metrics[key]:.4f}" for key in METRIC_KEYS]
    return "\n".join(lines) + "\n"
