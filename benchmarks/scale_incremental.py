"""An incremental ``docquery ingest`` of a few documents into a large collection, end to end.

Needs a collection that ``benchmarks/scale.py --keep DATA_DIR --model-id <the bundled model's id>``
built. Loads the bundled embedder first (timed apart: the figure excludes model load), then runs
the real ingest pipeline (discover, plan against every record, parse, chunk, embed, upsert,
end-of-run optimize) on ``--docs`` new synthetic documents, and reports the seconds, the chunks
and the index's segments before and after.

    .venv/bin/python benchmarks/scale_incremental.py --data-dir /tmp/scale/keep200k --docs 10 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from docquery.config.settings import Settings
from docquery.index import QdrantIndex
from docquery.wiring import build_embedder, build_index
from ingest.pipeline import IngestOptions, run_ingest

WORDS = [
    "policy",
    "badge",
    "office",
    "review",
    "budget",
    "project",
    "vendor",
    "contract",
    "access",
    "audit",
    "report",
    "quarter",
]


def _document(rng: random.Random, words: int) -> str:
    paragraphs = []
    for _ in range(max(1, words // 120)):
        paragraphs.append(" ".join(rng.choice(WORDS) + str(rng.randrange(500)) for _ in range(120)) + ".")
    return "\n\n".join(paragraphs) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True, help="the --keep dir of benchmarks/scale.py")
    ap.add_argument("--docs", type=int, default=10)
    ap.add_argument("--words", type=int, default=1500, help="words per document")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    settings = Settings(data_dir=args.data_dir, qdrant={"collection": "scale"})
    t0 = time.monotonic()
    embedder = build_embedder(settings)
    embedder.embed(["warm up"])
    model_s = time.monotonic() - t0
    index = build_index(settings, embedder)
    assert isinstance(index, QdrantIndex)
    before = index.stats()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="docquery-incr-") as tmp:
        docs = Path(tmp)
        for i in range(args.docs):
            (docs / f"new-{i}.txt").write_text(_document(rng, args.words))
        t0 = time.monotonic()
        report = run_ingest(settings, IngestOptions(paths=(docs,), groups=("g1",)), embedder=embedder, index=index)
        ingest_s = time.monotonic() - t0
    after = index.stats()
    index.close()
    result = {
        "collection_points_before": before.points,
        "docs": args.docs,
        "chunks_written": report.chunks_written,
        "ingest_s": round(ingest_s, 2),
        "model_load_s": round(model_s, 2),
        "segments_before": before.segments,
        "segments_after": after.segments,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "error": report.error,
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
