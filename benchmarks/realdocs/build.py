"""Builds a real-documents corpus: a Debian package of public HTML documentation, fetched
without root (``apt-get download``, then ``dpkg-deb -x``) into a cache folder outside the
repository, its pages copied into ``CACHE/corpus/PACKAGE`` (the folder to ingest), each at its
path under the manual's HTML root.

    .venv/bin/python -m benchmarks.realdocs.build [--package postgresql-doc-15] [--cache ~/.cache/docquery/realdocs]
                                                  [--pages N]

Two corpora (``CORPORA``): ``postgresql-doc-15``, the one the work was measured on (questions.json),
and ``python3.11-doc``, Python's own manual, the hold-out: nobody tuned on it, its questions
(questions-python.json) were written once, before its first run, and are not changed to suit the
results. Of Python's manual it keeps the sections a user reads (library, tutorial, howto, faq,
using, reference: 381 pages, 34 MB), not the C API, the release notes or distutils.

Prints the corpus folder. ``--pages N`` keeps every page a question names and fills up to N with
the others in a fixed pseudo-random order (by the SHA-256 of their paths), into ``PACKAGE-N``:
a smaller corpus for a slow machine, the same one on every run. Nothing of the corpus is committed;
the questions are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PACKAGE = "postgresql-doc-15"
DEFAULT_CACHE = Path.home() / ".cache" / "docquery" / "realdocs"


@dataclass(frozen=True)
class Corpus:
    questions: Path
    sections: tuple[str, ...] = ()  # top folders under the HTML root to keep; () keeps every page


CORPORA = {
    "postgresql-doc-15": Corpus(HERE / "questions.json"),
    "python3.11-doc": Corpus(
        HERE / "questions-python.json", sections=("library", "tutorial", "howto", "faq", "using", "reference")
    ),
}


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


def questions_for(corpus: Path) -> Path:
    """The questions of a corpus folder this script built (``PACKAGE`` or ``PACKAGE-N``)."""
    for package, known in CORPORA.items():
        if corpus.name == package or corpus.name.startswith(package + "-"):
            return known.questions
    raise SystemExit(f"{corpus.name} is none of the corpora ({', '.join(CORPORA)}): pass --questions")


def chosen(pages: list[str], limit: int | None, questions: Path) -> list[str]:
    """``pages`` are paths under the HTML root, as the questions name them."""
    if limit is None or limit >= len(pages):
        return pages
    named = {p for q in json.loads(questions.read_text())["questions"] for p in q["pages"]}
    keep = [p for p in pages if p in named]
    rest = sorted((p for p in pages if p not in named), key=lambda p: hashlib.sha256(p.encode()).digest())
    return sorted(keep + rest[: max(0, limit - len(keep))])


def html_pages(extracted: Path, sections: tuple[str, ...]) -> tuple[Path, list[str]]:
    """The manual's HTML root (the folder that holds all its pages) and its pages' paths under it."""
    found = sorted(extracted.rglob("*.html"))
    if not found:
        raise SystemExit(f"{extracted.name} holds no HTML pages")
    root = Path(os.path.commonpath([p.parent for p in found]))
    pages = [p.relative_to(root).as_posix() for p in found]
    if sections:
        pages = [p for p in pages if p.split("/", 1)[0] in sections and "/" in p]
    return root, pages


def build(package: str, cache: Path, limit: int | None = None) -> Path:
    if package not in CORPORA:
        raise SystemExit(f"no questions for {package}: one of {', '.join(CORPORA)}")
    corpus_def = CORPORA[package]
    deb = fetch(package, cache)
    extracted = cache / "extracted" / deb.stem
    if not extracted.exists():
        tmp = extracted.with_name(extracted.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)  # dpkg-deb on PATH
        tmp.rename(extracted)
    root, pages = html_pages(extracted, corpus_def.sections)
    pages = chosen(pages, limit, corpus_def.questions)
    corpus = cache / "corpus" / (package if limit is None else f"{package}-{limit}")
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    for page in pages:
        target = corpus / page
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / page, target)
    return corpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", default=DEFAULT_PACKAGE, choices=sorted(CORPORA))
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--pages", type=int, default=None, help="at most this many pages (all that questions name)")
    args = ap.parse_args(argv)
    corpus = build(args.package, args.cache.expanduser(), args.pages)
    pages = list(corpus.rglob("*.html"))
    size = sum(p.stat().st_size for p in pages)
    print(f"{corpus}  ({len(pages)} pages, {size / 1e6:.1f} MB)", file=sys.stderr)
    print(corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
