"""The embedded path end to end, with the real bundled model and the real Edge engine."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from docquery.cli import main
from docquery.config.settings import Settings
from docquery.core.collection import ModelMismatchError
from docquery.wiring import build_index
from tests.support.fakes import HashEmbedder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUESTION = "How many days do I have to submit an expense report?"


def test_local_embedder_dimension_and_normalisation(local_embedder: Any) -> None:
    vectors = local_embedder.embed(["Submit expense reports within 30 days.", "Annual leave is 28 days.", ""])
    assert local_embedder.dimension == 384
    assert local_embedder.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    for v in vectors:
        assert len(v) == 384
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4)
    q = local_embedder.embed(["deadline for expense claims"], query=True)[0]
    cos = [sum(a * b for a, b in zip(q, v, strict=True)) for v in vectors[:2]]
    assert cos[0] > cos[1]  # semantics, not just shape


def test_local_embedder_uses_the_full_256_token_window(local_embedder: Any) -> None:
    # The package's tokenizer.json truncates at 128; text past token 128 must still count.
    base = "alpha " * 150
    a, b = local_embedder.embed([base + "zebra giraffe elephant " * 20, base + "invoice ledger payment " * 20])
    assert sum(x * y for x, y in zip(a, b, strict=True)) < 0.999


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples ingested once for the module (three ingests with the real model cost about 20 s);
    no test here changes what the default collection holds."""
    tmp = tmp_path_factory.mktemp("demo")
    corpus = tmp / "examples"
    shutil.copytree(EXAMPLES, corpus)
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if n.startswith("DOCQUERY_")]:
            mp.delenv(name)
        mp.setenv("DOCQUERY_EMBEDDER__TUNE_MALLOC", "false")
        mp.setenv("DOCQUERY_DATA_DIR", str(tmp / "data"))
        mp.setenv("DOCQUERY_SECRETS_DIR", str(tmp / "no-secrets"))
        assert main(["ingest", str(corpus / "handbook"), "--groups", "staff", "--json"]) == 0
        assert main(["ingest", str(corpus / "security"), "--groups", "security", "--json"]) == 0
        assert main(["ingest", str(corpus / "public"), "--public", "--json"]) == 0
    return tmp


@pytest.fixture
def demo_index(demo_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(demo_data / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(demo_data / "no-secrets"))
    return demo_data


def _ask(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["ask", QUESTION, "--json", *extra]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_ask_answers_with_citations_for_an_entitled_caller(
    demo_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = _ask(capsys, "--as-groups", "staff")
    assert answer["mode"] == "extractive"
    assert answer["citations"], "an entitled caller gets citations"
    assert answer["citations"][0]["source"] == "handbook/expenses.txt"
    assert "30 days" in answer["answer"]
    assert "[S1]" in answer["answer"]


def test_caller_without_groups_gets_nothing(demo_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = _ask(capsys)
    assert answer["citations"] == []
    assert "30 days" not in answer["answer"]


def test_caller_without_the_group_gets_not_even_a_citation(
    demo_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = _ask(capsys, "--as-groups", "security,contractors")
    sources = {c["source"] for c in answer["citations"]}
    assert not sources & {"expenses.txt", "onboarding.md"}
    assert "30 days" not in answer["answer"]
    assert "expense report within" not in json.dumps(answer)


def test_reingest_of_unchanged_files_writes_nothing(demo_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["ingest", str(demo_index / "examples" / "handbook"), "--groups", "staff", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["chunks_written"] == 0
    assert report["unchanged"] == 2


def test_opening_a_collection_with_another_model_is_refused(demo_index: Path) -> None:
    settings = Settings(data_dir=demo_index / "data", secrets_dir=demo_index / "no-secrets")
    with pytest.raises(ModelMismatchError) as info:
        build_index(settings, HashEmbedder(dimension=384, model_id="other/model"))
    message = str(info.value)
    assert "sentence-transformers/all-MiniLM-L6-v2" in message
    assert "other/model" in message


def test_cli_reports_model_mismatch_as_a_configuration_error(
    demo_index: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=demo_index / "data", secrets_dir=demo_index / "no-secrets")
    # Build a second collection with a different model, then ask against it with the real one.
    build_index(settings, HashEmbedder(dimension=384, model_id="other/model"), collection="other").close()
    capsys.readouterr()
    assert main(["ask", QUESTION, "--as-groups", "staff", "--collection", "other"]) == 2
    assert "was built with embedding model 'other/model@384'" in capsys.readouterr().err
