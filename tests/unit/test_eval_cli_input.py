"""``docquery eval retrieval``: a wrong dataset fails before the model loads, and stderr keeps the log format."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from docquery import cli
from docquery.evaluation import progress as eval_progress
from tests.support.fakes import HashEmbedder
from tests.unit.test_metrics import QUERIES, TOPICS, write_beir


class _ModelLoaded(Exception):
    pass


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "no-secrets"))
    monkeypatch.delenv("DOCQUERY_LOG_FORMAT", raising=False)  # auto: JSON, stderr is not a terminal here


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import docquery.wiring

    def build_embedder(_settings: object) -> None:
        raise _ModelLoaded  # loading the model is what a wrong dataset must not wait for

    monkeypatch.setattr(docquery.wiring, "build_embedder", build_embedder)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "ds", {"d1": ("t", "text")}, {"1": "q"}, {"test": [("1", "d1", 1)]})


@pytest.mark.usefixtures("env", "no_model")
@pytest.mark.parametrize("remove", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_a_missing_file_is_one_line_before_the_model_loads(
    dataset: Path, capsys: pytest.CaptureFixture[str], remove: str
) -> None:
    (dataset / remove).unlink()
    assert cli.main(["eval", "retrieval", str(dataset)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"docquery: missing {remove} in {dataset}: a BEIR-layout dataset has corpus.jsonl, queries.jsonl "
        "and qrels/test.tsv"
    ]


@pytest.mark.usefixtures("env", "no_model")
def test_the_split_asked_for_is_checked(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "retrieval", str(dataset), "--split", "dev"]) == 2
    assert "missing qrels/dev.tsv" in capsys.readouterr().err


@pytest.mark.usefixtures("env", "no_model")
@pytest.mark.parametrize("kind", ["absent", "file"])
def test_a_dataset_dir_that_is_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    where = tmp_path / "nowhere"
    if kind == "file":
        where.write_text("x")
    assert cli.main(["eval", "retrieval", str(where)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"docquery: the dataset directory {where} does not exist or is not a directory: "
        "give a directory with corpus.jsonl, queries.jsonl and qrels/test.tsv"
    ]


@pytest.mark.usefixtures("env")
def test_off_a_terminal_every_stderr_line_is_a_json_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import docquery.wiring

    rows = [("1", "d1", 1), ("2", "d2", 1), ("3", "d3", 1)]
    root = write_beir(tmp_path / "tiny", TOPICS, QUERIES, {"test": rows})
    monkeypatch.setattr(docquery.wiring, "build_embedder", lambda settings: HashEmbedder())
    assert cli.main(["eval", "retrieval", str(root), "--mode", "hybrid", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["n_queries"] == 3
    records = [json.loads(line) for line in err.splitlines()]  # every line parses
    progress = [r["message"] for r in records if r["logger"] == "docquery.evaluation.progress"]
    assert progress[0].startswith("embed corpus: 0/")
    assert any(m.startswith("search hybrid: 3/3 done in") for m in progress)
    for text in QUERIES.values():
        assert text not in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_bar_is_drawn_on_that_stream_never_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    term = _Terminal()
    bar = eval_progress.default_progress(term)
    assert isinstance(bar, eval_progress.RichProgress)
    bar.start("embed corpus", 4)
    bar.advance(4)
    bar.finish()
    bar.close()
    assert "embed corpus" in term.getvalue()
    assert capsys.readouterr().out == ""  # stdout carries --json's object only


def test_off_a_terminal_progress_is_logged() -> None:
    assert isinstance(eval_progress.default_progress(io.StringIO()), eval_progress.LogProgress)
