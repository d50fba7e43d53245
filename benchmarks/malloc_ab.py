"""A/B of docquery.runtime.malloc: the same ingest measurements in fresh processes, with and without the
glibc malloc tuning, alternating so that the machine's drift hits both alike.

Each child process writes the first N SciFact documents as files, loads the model (untimed),
and runs: raw embedder in one call, DocQuery's ingest, raw embedder in the pipeline's calls, then
llama-index's default pipeline in the same process. The tuning is applied (or not) first thing,
before any thread starts, as ``docquery ingest`` does. Kernel time and page faults come from
``getrusage`` around each step.

    .venv/bin/python benchmarks/malloc_ab.py [--docs 1000] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _usage() -> tuple[float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_stime, r.ru_minflt


def child(tuned: bool, n_docs: int) -> dict[str, Any]:
    """One process's measurements; runs in a fresh interpreter (see main)."""
    from docquery.runtime.malloc import tune_for_bulk_embedding

    applied = tune_for_bulk_embedding() if tuned else False
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ingest_throughput as bench

    from docquery.config.settings import Settings
    from docquery.embedders.local import LocalEmbedder

    tmp = Path(tempfile.mkdtemp(prefix="malloc-ab-"))
    root = tmp / "corpus"
    bench.write_corpus(root, n_docs)
    embedder = LocalEmbedder()
    embedder.embed(["warm up the model"] * 8)
    texts = bench.docquery_chunks(root, Settings(data_dir=tmp / "unused"), embedder)
    steps: dict[str, Any] = {}

    def step(name: str, fn: Any) -> Any:
        sys0, faults0 = _usage()
        out = fn()
        sys1, faults1 = _usage()
        steps[name] = {"sys_s": sys1 - sys0, "faults": faults1 - faults0, "load1": os.getloadavg()[0]}
        return out

    one = step("raw_one_call", lambda: bench.run_raw(embedder, texts, None))
    dq, _ = step("docquery", lambda: bench.run_docquery(root, tmp / "data", embedder))
    calls = step("raw_calls", lambda: bench.run_raw(embedder, texts, Settings().ingest.embed_batch))
    embed_model = bench.llama_setup()
    embed_model.get_text_embedding_batch(["warm up"] * 8)
    llama = step("llama", lambda: bench.run_llama(root, embed_model))
    raw = bench.bracketed(one, calls)
    return {
        "tuned": applied, "steps": steps, "raw_chunks_per_s": raw["chunks_per_s"],
        "docquery_seconds": dq["seconds"], "docquery_vs_raw": dq["chunks_per_s"] / raw["chunks_per_s"],
        "embedder_busy": dq["embedder_busy_fraction"], "llama_seconds": llama["seconds"],
        "speedup_vs_llama": llama["seconds"] / dq["seconds"],
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }  # fmt: skip


def run_child(tuned: bool, n_docs: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", "tuned" if tuned else "default", "--docs", str(n_docs)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO, env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--child", choices=["default", "tuned"], default=None)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, str(REPO))
        result = child(args.child == "tuned", args.docs)
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    print("| pair | malloc | (1) raw chunks/s | (2) DocQuery s | (2)/(1) | kernel s / page faults in (2) "
          "| llama-index s | kernel s / page faults in it | (3) | peak RSS MB |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        for tuned in order:
            t0 = time.perf_counter()
            r = run_child(tuned, args.docs)
            assert r["tuned"] == tuned, "the tuning did not apply"
            dq, ll = r["steps"]["docquery"], r["steps"]["llama"]
            print(
                f"| {pair + 1} | {'tuned' if tuned else 'default'} | {r['raw_chunks_per_s']:.1f} | "
                f"{r['docquery_seconds']:.1f} | {100 * r['docquery_vs_raw']:.1f} % | "
                f"{dq['sys_s']:.1f} / {dq['faults']:,} | {r['llama_seconds']:.1f} | "
                f"{ll['sys_s']:.1f} / {ll['faults']:,} | "
                f"{r['speedup_vs_llama']:.2f}× | {r['max_rss_mb']:.0f} |",
                flush=True,
            )
            print(f"  ({time.perf_counter() - t0:.0f} s, load {dq['load1']:.1f})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
