"""``docquery eval retrieval``: a wrong dataset fails in one line before the model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery import cli
from tests.unit.test_metrics import write_beir


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
