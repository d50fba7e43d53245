"""Ingest throughput of two checkouts, alternated: does a change keep the throughput of the commit before it?

    git worktree add /tmp/before COMMIT
    .venv/bin/python -m benchmarks.ingest_ab /tmp/before . [SCIFACT_DIR] --docs 1000 --rounds 7

Each round runs ``benchmarks.ingest_throughput``'s DocQuery end-to-end ingest (its measure (2)) once per
checkout, each in a fresh process whose ``sys.path`` starts with that checkout, so each side runs its own
``ingest`` and ``docquery`` in the same venv. The model is loaded and warmed before the timing, the data dir is
new for every run, and the order alternates (AB, BA, AB, ...) so that the shared machine's drift hits both
sides alike. Reported per side: the median and spread of chunks/s, and of the seconds outside the embedder
(the pipeline's own work, which a change to reading, scanning or writing moves), with the load average; and the
median of each round's own after/before ratio, whose two runs are adjacent and so share the machine's state.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.ingest_throughput import write_corpus

# Runs in the child, with the checkout under test first on sys.path.
_CHILD = """
import json, sys
from pathlib import Path
from benchmarks import ingest_throughput as it
from docquery.config.settings import Settings
from docquery.embedders.local import LocalEmbedder
from docquery.runtime.malloc import tune_for_bulk_embedding
if Settings().embedder.tune_malloc:
    tune_for_bulk_embedding()
embedder = LocalEmbedder()
embedder.embed(["warm up the model"] * 8)
out, _ = it.run_docquery(Path(sys.argv[1]), Path(sys.argv[2]), embedder)
print(json.dumps(out))
"""


def run_side(tree: Path, root: Path, work: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    data = Path(tempfile.mkdtemp(dir=work, prefix="data-"))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(data)],
        cwd=tree, env=env, capture_output=True, text=True, check=False
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: the ingest run exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["outside_embedder_s"] = out["seconds"] * (1 - out["embedder_busy_fraction"])
    return out


def summary(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [r[key] for r in runs]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path, help="checkout of the commit before the change")
    ap.add_argument("after", type=Path, help="checkout with the change")
    ap.add_argument("scifact", type=Path, nargs="?", default=os.environ.get("SCIFACT_DIR"))
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.scifact is None or not (Path(args.scifact) / "corpus.jsonl").is_file():
        ap.error("give a SciFact folder holding corpus.jsonl (or set SCIFACT_DIR)")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    with tempfile.TemporaryDirectory(prefix="ingest-ab-") as tmp:
        work = Path(tmp)
        root = work / "corpus"
        n_docs = write_corpus(Path(args.scifact) / "corpus.jsonl", root, args.docs)
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                out = run_side(trees[side], root, work)
                runs[side].append(out)
                print(f"round {r} {side}: {out['chunks_per_s']:.1f} chunks/s, {out['seconds']:.1f} s, "
                      f"{out['outside_embedder_s']:.2f} s outside the embedder, load {out['load1']:.2f}",
                      flush=True)  # fmt: skip
    result: dict[str, Any] = {"docs": n_docs, "rounds": args.rounds, "cpu": os.cpu_count(), "runs": runs}
    for side, side_runs in runs.items():
        result[side] = {key: summary(side_runs, key) for key in ("chunks_per_s", "outside_embedder_s", "load1")}
    ratio = result["after"]["chunks_per_s"]["median"] / result["before"]["chunks_per_s"]["median"]
    result["after_over_before"] = ratio
    paired = [a["chunks_per_s"] / b["chunks_per_s"] for a, b in zip(runs["after"], runs["before"], strict=True)]
    result["paired_after_over_before"] = summary([{"r": r} for r in paired], "r")
    for side in ("before", "after"):
        s = result[side]
        print(f"{side}: chunks/s median {s['chunks_per_s']['median']:.1f} "
              f"({s['chunks_per_s']['min']:.1f} to {s['chunks_per_s']['max']:.1f}); outside the embedder median "
              f"{s['outside_embedder_s']['median']:.2f} s; load {s['load1']['median']:.2f}")  # fmt: skip
    p = result["paired_after_over_before"]
    print(
        f"after / before: {ratio:.3f} (medians of chunks/s); {p['median']:.3f} median of the rounds' own "
        f"ratios ({p['min']:.3f} to {p['max']:.3f})"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
