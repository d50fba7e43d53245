"""Draw the scale curves (latency, recall, memory, build time against N) from scale.py's JSON lines.

    .venv/bin/python benchmarks/scale_plot.py results.jsonl --out docs/img/scale

Each input line is the last line of one ``benchmarks/scale.py --json`` run (the newest of each N
is drawn); writes one PNG per figure, named ``<out>-latency.png``, ``-recall.png``, ``-memory.png`` and ``-build.png``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

FIGURES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "latency": (
        "ms (worse of the 1- and 3-group callers)",
        [
            ("hybrid_acl_p50_ms", "hybrid p50"),
            ("hybrid_acl_p99_ms", "hybrid p99"),
            ("dense_acl_p50_ms", "dense p50"),
            ("dense_acl_p99_ms", "dense p99"),
            ("hybrid_acl_cpu_p50_ms", "hybrid CPU ms p50"),
            ("hybrid_acl_cpu_p99_ms", "hybrid CPU ms p99"),
        ],
    ),
    "recall": (
        "recall@10 vs exact search, same ACL filter",
        [("recall_at_10", "hybrid"), ("dense_recall_at_10", "dense")],
    ),
    "memory": (
        "MB",
        [
            ("peak_rss_mb", "peak RSS (build + search)"),
            ("peak_anon_mb", "peak anonymous"),
            ("serve_peak_rss_mb", "RSS while searching a reopened shard"),
            ("serve_peak_anon_mb", "anonymous while searching"),
            ("disk_mb", "on disk"),
        ],
    ),
    "build": (
        "seconds",
        [
            ("build_s", "until searchable"),
            ("write_s", "write path"),
            ("seal_s", "sealing full segments while writing"),
            ("optimize_s", "end-of-run optimize()"),
        ],
    ),
}


def latest_per_size(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last run of each N (every run stays in the file; the curve shows the newest)."""
    by_n = {int(r["chunks"]): r for r in sorted(rows, key=lambda r: str(r.get("date", "")))}
    return [by_n[n] for n in sorted(by_n)]


def plot(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    rows = latest_per_size(rows)
    n = [int(r["chunks"]) for r in rows]
    written = []
    for name, (ylabel, series) in FIGURES.items():
        fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
        for key, label in series:
            points = [(x, r[key]) for x, r in zip(n, rows, strict=True) if r.get(key) is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("chunks in the collection (N)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"DocQuery embedded index: {name} against N")
        ax.grid(visible=True, which="both", alpha=0.3)
        ax.legend()
        path = out.parent / f"{out.name}-{name}.png"
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="JSON lines, one scale.py --json result each")
    ap.add_argument("--out", type=Path, default=Path("docs/img/scale"), help="path prefix of the PNGs")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    if not rows:
        ap.error(f"{args.results}: no results")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for path in plot(rows, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
