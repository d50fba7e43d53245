"""Builds the real-documents corpus: a Debian package of public HTML documentation, fetched
without root (``apt-get download``, then ``dpkg-deb -x``) into a cache folder outside the
repository, its pages copied flat into ``CACHE/corpus/PACKAGE`` (the folder to ingest).

    .venv/bin/python benchmarks/realdocs/build.py [--package postgresql-doc-15] [--cache ~/.cache/docquery/realdocs]

Prints the corpus folder. Nothing of the corpus is committed; the questions are
(benchmarks/realdocs/questions.json). Python's own documentation is left out on purpose: it is
kept aside to check, later, that the results hold on a corpus nobody tuned on.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_PACKAGE = "postgresql-doc-15"
DEFAULT_CACHE = Path.home() / ".cache" / "docquery" / "realdocs"


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


def build(package: str, cache: Path) -> Path:
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
    corpus = cache / "corpus" / package
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
    args = ap.parse_args(argv)
    corpus = build(args.package, args.cache.expanduser())
    pages = list(corpus.glob("*.html"))
    size = sum(p.stat().st_size for p in pages)
    print(f"{corpus}  ({len(pages)} pages, {size / 1e6:.1f} MB)", file=sys.stderr)
    print(corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
