"""Builds the real-documents corpus: a Debian package of public HTML documentation, fetched
without root (``apt-get download``, then ``dpkg-deb -x``) into a cache folder outside the
repository, its pages copied flat into ``CACHE/corpus/PACKAGE`` (the folder to ingest).

    .venv/bin/python benchmarks/realdocs/build.py [--package postgresql-doc-15] [--cache ~/.cache/docquery/realdocs]
                                                  [--pages N]

Prints the corpus folder. ``--pages N`` keeps every page a question names and fills up to N with
the others in a fixed pseudo-random order (by the SHA-256 of their names), into ``PACKAGE-N``:
a smaller corpus for a slow machine, the same one on every run. Nothing of the corpus is committed; the questions are
(benchmarks/realdocs/questions.json). Python's own documentation is left out on purpose: it is
kept aside to check, later, that the results hold on a corpus nobody tuned on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_PACKAGE = "postgresql-doc-15"
DEFAULT_CACHE = Path.home() / ".cache" / "docquery" / "realdocs"
QUESTIONS = Path(__file__).resolve().parent / "questions.json"


def fetch(package: str, cache: Path) -> Path:
    """The package's .deb in ``cache/debs`` (downloaded once)."""
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True)  # apt on PATH
        found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        raise SystemExit(f"apt-get download {package} left no .deb in {debs}")
    return found[-1]


def chosen(pages: list[Path], limit: int | None) -> list[Path]:
    if limit is None or limit >= len(pages):
        return pages
    named = {p for q in json.loads(QUESTIONS.read_text())["questions"] for p in q["pages"]}
    keep = [p for p in pages if p.name in named]
    rest = sorted((p for p in pages if p.name not in named), key=lambda p: hashlib.sha256(p.name.encode()).digest())
    return sorted(keep + rest[: max(0, limit - len(keep))])


def build(package: str, cache: Path, limit: int | None = None) -> Path:
    deb = fetch(package, cache)
    extracted = cache / "extracted" / deb.stem
    if not extracted.exists():
        tmp = extracted.with_name(extracted.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)  # dpkg-deb on PATH
        tmp.rename(extracted)
    pages = sorted(extracted.rglob("*.html"))
    if not pages:
        raise SystemExit(f"{deb.name} holds no HTML pages")
    pages = chosen(pages, limit)
    corpus = cache / "corpus" / (package if limit is None else f"{package}-{limit}")
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    for page in pages:
        target = corpus / page.name
        if target.exists():  # the questions name pages by file name: two of one name would be ambiguous
            raise SystemExit(f"two pages named {page.name} in {deb.name}")
        shutil.copyfile(page, target)
    return corpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", default=DEFAULT_PACKAGE)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--pages", type=int, default=None, help="at most this many pages (all that questions name)")
    args = ap.parse_args(argv)
    corpus = build(args.package, args.cache.expanduser(), args.pages)
    pages = list(corpus.glob("*.html"))
    size = sum(p.stat().st_size for p in pages)
    print(f"{corpus}  ({len(pages)} pages, {size / 1e6:.1f} MB)", file=sys.stderr)
    print(corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
