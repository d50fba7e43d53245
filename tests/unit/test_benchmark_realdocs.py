"""The real-documents evaluation's corpus layout and page naming (benchmarks/realdocs): pages are
paths under the manual's HTML root, so a manual with one file name in several folders (Python's
``index.html``) is scored page by page, and each corpus is scored against its own questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.realdocs import build, evaluate


def _manual(root: Path, pages: list[str]) -> Path:
    html = root / "usr" / "share" / "doc" / "manual" / "html"
    for page in pages:
        (html / page).parent.mkdir(parents=True, exist_ok=True)
        (html / page).write_text(f"<html><body><p>{page}</p></body></html>")
    return html


def test_pages_are_paths_under_the_html_root_and_sections_filter_them(tmp_path: Path) -> None:
    html = _manual(tmp_path, ["index.html", "library/index.html", "library/csv.html", "c-api/index.html"])
    root, pages = build.html_pages(tmp_path, ())
    assert root == html
    assert sorted(pages) == ["c-api/index.html", "index.html", "library/csv.html", "library/index.html"]
    _, kept = build.html_pages(tmp_path, ("library",))
    assert sorted(kept) == ["library/csv.html", "library/index.html"]  # top-level pages are no section's


def test_a_flat_manual_keeps_bare_file_names(tmp_path: Path) -> None:
    html = _manual(tmp_path, ["sql-copy.html", "sql-vacuum.html"])
    assert build.html_pages(tmp_path, ()) == (html, ["sql-copy.html", "sql-vacuum.html"])


def test_a_cut_corpus_keeps_every_page_a_question_names(tmp_path: Path) -> None:
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps({"questions": [{"q": "?", "pages": ["library/csv.html", "b/x.html"]}]}))
    pages = [f"a/{i}.html" for i in range(20)] + ["library/csv.html", "b/x.html"]
    chosen = build.chosen(pages, 5, questions)
    assert len(chosen) == 5 and {"library/csv.html", "b/x.html"} <= set(chosen)
    assert chosen == build.chosen(list(reversed(pages)), 5, questions)  # the same pages on every run
    assert build.chosen(pages, None, questions) == pages


@pytest.mark.parametrize(
    ("folder", "questions"),
    [
        ("postgresql-doc-15", "questions.json"),
        ("postgresql-doc-15-200", "questions.json"),
        ("python3.11-doc", "questions-python.json"),
        ("python3.11-doc-100", "questions-python.json"),
    ],
)
def test_each_corpus_is_scored_against_its_own_questions(tmp_path: Path, folder: str, questions: str) -> None:
    assert build.questions_for(tmp_path / folder).name == questions


def test_an_unknown_corpus_asks_for_its_questions(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--questions"):
        build.questions_for(tmp_path / "my-manual")


def test_a_passage_names_its_page_by_its_path_under_the_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "python3.11-doc"
    assert evaluate.page_of("python3.11-doc/library/index.html", corpus) == "library/index.html"  # as ingest names it
    assert evaluate.page_of(str(corpus / "library" / "index.html"), corpus) == "library/index.html"
    assert (
        evaluate.page_of("postgresql-doc-15-200/sql-copy.html", tmp_path / "postgresql-doc-15-200") == "sql-copy.html"
    )
    with pytest.raises(ValueError, match="not a page"):
        evaluate.page_of("other/library/index.html", corpus)


@pytest.mark.parametrize("name", ["questions.json", "questions-python.json"])
def test_question_files_name_pages_for_every_question(name: str) -> None:
    questions = json.loads((Path(build.HERE) / name).read_text())["questions"]
    assert questions and len({q["q"] for q in questions}) == len(questions)
    for q in questions:
        assert q["pages"] and all(p.endswith(".html") and not p.startswith("/") for p in q["pages"])
