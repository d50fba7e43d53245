"""Writes the SciFact sample the tests ingest: the first documents of the full BEIR corpus, verbatim.

    .venv/bin/python tests/data/scifact/make_sample.py SCIFACT_DIR

SCIFACT_DIR is a BEIR-layout SciFact folder (corpus.jsonl, queries.jsonl, qrels/); README.md beside
this script says where it comes from and under which license the sample is kept.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = 160  # the largest test corpus (the kill-and-rerun ingest) takes 150


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("scifact_dir", type=Path)
    ap.add_argument("--docs", type=int, default=DOCS)
    args = ap.parse_args()
    source = args.scifact_dir / "corpus.jsonl"
    if not source.is_file():
        raise SystemExit(f"{source} not found: give the folder that holds SciFact's corpus.jsonl")
    with source.open("rb") as fh:
        lines = [line for line, _ in zip(fh, range(args.docs), strict=False)]
    target = HERE / "corpus.jsonl"
    target.write_bytes(b"".join(lines))
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    print(f"{target}: {len(lines)} documents, sha256 {digest}")


if __name__ == "__main__":
    main()
