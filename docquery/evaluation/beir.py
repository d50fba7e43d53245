"""Loader for the BEIR layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from docquery.core.errors import DocQueryError

Qrels = dict[str, dict[str, int]]


class DatasetError(DocQueryError):
    """The dataset directory is missing a file or a file is malformed (names the file and line)."""


@dataclass(frozen=True)
class BeirDoc:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirDataset:
    corpus: dict[str, BeirDoc]
    queries: dict[str, str]  # only the queries that have judgements in the split
    qrels: Qrels


def _jsonl(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        raise DatasetError(f"missing {path.name} in {path.parent}")
    rows: list[dict[str, object]] = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise DatasetError(f"{path.name} line {n} is not JSON") from None
            if not isinstance(row, dict) or "_id" not in row:
                raise DatasetError(f"{path.name} line {n} has no _id")
            rows.append(row)
    return rows


def load_qrels(path: Path) -> Qrels:
    """``query-id<TAB>corpus-id<TAB>score`` with a header line; score 0 rows are kept (not relevant)."""
    if not path.is_file():
        raise DatasetError(f"missing qrels/{path.name} in {path.parent.parent}")
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        for n, row in enumerate(reader, start=1):
            if not row or (n == 1 and not row[-1].strip().lstrip("-").isdigit()):
                continue  # blank line or the header
            if len(row) < 3:
                raise DatasetError(f"qrels/{path.name} line {n} has {len(row)} columns, expected 3")
            try:
                score = int(row[2])
            except ValueError:
                raise DatasetError(f"qrels/{path.name} line {n} has a non-integer score") from None
            qrels.setdefault(row[0].strip(), {})[row[1].strip()] = score
    return qrels


def check_layout(root: Path, split: str = "test") -> None:
    """The files ``load_beir`` reads exist: cheap, so a wrong path fails before a model is loaded."""
    if not root.is_dir():
        raise DatasetError(
            f"the dataset directory {root} does not exist or is not a directory: "
            f"give a directory with corpus.jsonl, queries.jsonl and qrels/{split}.tsv"
        )
    for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (root / name).is_file():
            raise DatasetError(
                f"missing {name} in {root}: a BEIR-layout dataset has corpus.jsonl, queries.jsonl and qrels/{split}.tsv"
            )


def load_beir(root: Path, split: str = "test") -> BeirDataset:
    corpus = {
        str(r["_id"]): BeirDoc(str(r["_id"]), str(r.get("title") or ""), str(r.get("text") or ""))
        for r in _jsonl(root / "corpus.jsonl")
    }
    all_queries = {str(r["_id"]): str(r.get("text") or "") for r in _jsonl(root / "queries.jsonl")}
    qrels = load_qrels(root / "qrels" / f"{split}.tsv")
    missing = sorted(q for q in qrels if q not in all_queries)
    if missing:
        raise DatasetError(f"qrels/{split}.tsv names {len(missing)} queries absent from queries.jsonl")
    queries = {q: all_queries[q] for q in sorted(qrels, key=_natural)}
    return BeirDataset(corpus=corpus, queries=queries, qrels=qrels)


def _natural(key: str) -> tuple[int, int | str]:
    return (0, int(key)) if key.isdigit() else (1, key)
