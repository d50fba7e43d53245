"""Draw the scale curves (latency, recall, memory, build time against N) from scale.py's JSON lines.

    .venv/bin/python -m benchmarks.scale_plot results.jsonl --out docs/img/scale

    .venv/bin/python -m benchmarks.scale_plot results.jsonl --since 2026-12-03 --out docs/img/scale

Each input line is the last line of one ``benchmarks/scale.py --json`` run. Each curve joins the
medians of each N's runs (``--since``: only runs on or after that date, say since a machine changed),
and a band spans their lowest and highest values, so a reader sees how far one run strays on a noisy
machine.
Writes one PNG per figure, named ``<out>-latency.png``, ``-recall.png``, ``-memory.png`` and ``-build.png``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

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


class Spread(NamedTuple):
    n: int
    median: float
    low: float
    high: float
    runs: int


def runs_per_size(rows: list[dict[str, Any]], since: str = "") -> dict[int, list[dict[str, Any]]]:
    """The runs of each N dated on or after ``since`` (ISO dates compare as text), smallest N first."""
    by_n: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if str(r.get("date", "")) >= since:
            by_n[int(r["chunks"])].append(r)
    return dict(sorted(by_n.items()))


def spread(by_n: dict[int, list[dict[str, Any]]], key: str) -> list[Spread]:
    """Median, lowest and highest value of ``key`` at each N, over the runs that report it."""
    out = []
    for n, runs in by_n.items():
        values = [float(r[key]) for r in runs if r.get(key) is not None]
        if values:
            out.append(Spread(n, statistics.median(values), min(values), max(values), len(values)))
    return out


def _short(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def plot(rows: list[dict[str, Any]], out: Path, *, since: str = "") -> list[Path]:
    # matplotlib is a benchmark extra (make bench-setup): the figures' arithmetic above works without it.
    import matplotlib as mpl

    mpl.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    by_n = runs_per_size(rows, since)
    if not by_n:
        raise ValueError(f"no runs dated on or after {since!r}")
    counts = ", ".join(f"{_short(n)} {len(runs)}" for n, runs in by_n.items())
    written = []
    for name, (ylabel, series) in FIGURES.items():
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
        for key, label in series:
            points = spread(by_n, key)
            if points:
                xs = [p.n for p in points]
                (line,) = ax.plot(xs, [p.median for p in points], marker="o", label=label)
                ax.fill_between(
                    xs, [p.low for p in points], [p.high for p in points], color=line.get_color(), alpha=0.15
                )
        ax.set_xscale("log")
        ax.set_xlabel("chunks in the collection (N)")
        ax.set_ylabel(ylabel)
        ax.set_title(
            f"DocQuery embedded index: {name} against N\nmedian of runs, band lowest to highest; runs per N: {counts}",
            fontsize=9,
        )
        ax.grid(visible=True, which="both", alpha=0.3)
        if ax.lines:  # a figure whose fields no run reports stays empty
            ax.legend(fontsize=8)
        path = out.parent / f"{out.name}-{name}.png"
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="JSON lines, one scale.py --json result each")
    ap.add_argument("--since", default="", help="only runs dated on or after this ISO date, e.g. 2026-12-03")
    ap.add_argument("--out", type=Path, default=Path("docs/img/scale"), help="path prefix of the PNGs")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    if not rows:
        ap.error(f"{args.results}: no results")
    if importlib.util.find_spec("matplotlib") is None:
        ap.error("matplotlib is not installed: it is a benchmark extra, installed by `make bench-setup`")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        written = plot(rows, args.out, since=args.since)
    except ValueError as err:
        ap.error(f"{args.results}: {err}")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
