"""Search-time parameters on a kept scale collection: recall@10 against exact search, and cost per query.

Opens the collection ``benchmarks/scale.py --keep DIR`` left behind and runs the same kind of queries
(random unit vectors, words of the collection's vocabulary, the 1-group and 3-group callers) through
``QdrantIndex.search`` under each variant of the embedded engine's dense search parameters: the
default, larger ``hnsw_ef``, and Qdrant's ACORN filtered search. Figures in docs/benchmarks.md.

    .venv/bin/python benchmarks/scale_params.py --keep /tmp/scale/keep1m --queries 100
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from qdrant_edge import AcornSearchParams, SearchParams

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.scale import CALLERS  # noqa: E402
from benchmarks.synthetic import DIM, TextMaker, unit_vectors  # noqa: E402
from docquery.config.settings import Settings  # noqa: E402
from docquery.core.domain import AclFilter  # noqa: E402
from docquery.index import QdrantIndex, edge, open_edge  # noqa: E402
from docquery.index.tuning import IndexTuning  # noqa: E402
from docquery.wiring import fusion_params, index_tuning  # noqa: E402

# name -> (hnsw_ef, ACORN on): the hnsw_ef rows go through the product's own tuning and search parameters.
VARIANTS: dict[str, tuple[int | None, bool]] = {
    "default": (None, False),
    "hnsw_ef 128": (128, False),
    "hnsw_ef 512": (512, False),
    "acorn, hnsw_ef default": (None, True),
    "acorn, hnsw_ef 128": (128, True),
}


def with_acorn(product: Callable[..., SearchParams]) -> Callable[..., SearchParams]:
    """The product's dense search parameters with Qdrant's ACORN filtered search turned on."""

    def params(t: IndexTuning, *, exact: bool = False, oversampling: float | None = None) -> SearchParams:
        base = product(t, exact=exact, oversampling=oversampling)
        if exact:
            return base
        acorn = AcornSearchParams(enable=True, max_selectivity=0.4)
        return SearchParams(hnsw_ef=base.hnsw_ef, exact=base.exact, quantization=base.quantization, acorn=acorn)

    return params


async def run_variant(
    index: QdrantIndex, queries: list[tuple[list[float], str]], truth: dict[str, list[set[str]]]
) -> dict[str, float]:
    row: dict[str, float] = {}
    for caller, groups in CALLERS.items():
        acl = AclFilter.for_groups(set(groups))
        for mode in ("dense", "hybrid"):
            found = wanted = 0
            wall, cpu = [], []
            for i, (dense, text) in enumerate(queries):
                t0, c0 = time.perf_counter(), time.process_time()
                hits = await index.search(dense=dense, text=text, acl=acl, limit=10, mode=mode)
                cpu.append((time.process_time() - c0) * 1000)
                wall.append((time.perf_counter() - t0) * 1000)
                exact = truth[f"{caller}/{mode}"][i]
                found += len({h.chunk.id for h in hits} & exact)
                wanted += len(exact)
            row[f"{caller} {mode} recall"] = found / wanted
            row[f"{caller} {mode} wall p50"] = statistics.median(wall)
            row[f"{caller} {mode} cpu p50"] = statistics.median(cpu)
    return row


async def exact_truth(index: QdrantIndex, queries: list[tuple[list[float], str]]) -> dict[str, list[set[str]]]:
    truth: dict[str, list[set[str]]] = {}
    for caller, groups in CALLERS.items():
        acl = AclFilter.for_groups(set(groups))
        for mode in ("dense", "hybrid"):
            truth[f"{caller}/{mode}"] = [
                {h.chunk.id for h in await index.search(dense=d, text=t, acl=acl, limit=10, mode=mode, exact=True)}
                for d, t in queries
            ]
    return truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, required=True, help="the --keep DIR of benchmarks/scale.py")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=42, help="the collection's seed (for its vocabulary)")
    args = ap.parse_args()

    settings = Settings()
    text = TextMaker(np.random.default_rng(args.seed))
    text.rng = np.random.default_rng(args.seed + 1000)  # same vocabulary, queries of their own
    qv = unit_vectors(text.rng, args.queries)
    queries = [(qv[i].tolist(), t) for i, t in enumerate(text.texts(args.queries, 3, 9))]
    shard = args.keep / "collections" / "scale"
    fusion, tuning = fusion_params(settings), index_tuning(settings)

    rows: dict[str, dict[str, float]] = {}
    truth: dict[str, list[set[str]]] | None = None
    product = edge.search_params
    for name, (ef, acorn) in VARIANTS.items():
        edge.search_params = with_acorn(product) if acorn else product
        index = open_edge(
            shard,
            name="scale",
            model_id="sentence-transformers/all-MiniLM-L6-v2",
            dimension=DIM,
            fusion=fusion,
            tuning=tuning if ef is None else replace(tuning, hnsw_ef=ef),
        )
        try:
            if truth is None:
                truth = asyncio.run(exact_truth(index, queries))
            for d, t in queries[:10]:  # warm-up
                asyncio.run(index.search(dense=d, text=t, acl=AclFilter.for_groups({"g1"}), limit=10, mode="dense"))
            rows[name] = asyncio.run(run_variant(index, queries, truth))
        finally:
            index.close()
        print(name, {k: round(v, 3) for k, v in rows[name].items()}, flush=True)

    keys = list(next(iter(rows.values())))
    print("\n| variant | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[k]:.3f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
