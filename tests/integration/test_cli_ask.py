"""``ask`` on an empty or missing index says so (exit 4); ``--top-k`` is bounded like the API."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.wiring import build_index
from tests.support.ingest_fixtures import ModelStandIn

EXIT_USAGE, EXIT_EMPTY = 2, 4


def _ask(tmp_path: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(
        DOCQUERY_DATA_DIR=str(tmp_path / "data"), DOCQUERY_SECRETS_DIR=str(tmp_path / "none"), HF_HUB_OFFLINE="1",
        **env_extra,
    )  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "docquery.cli", "ask", "What is the leave policy?", "--as-groups", "staff", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _one_line(got: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1, got.stderr
    return lines[0]


def test_ask_on_a_missing_index_says_so_and_creates_nothing(tmp_path: Path) -> None:
    got = _ask(tmp_path)
    assert got.returncode == EXIT_EMPTY and got.stdout == ""
    line = _one_line(got)
    assert "the index is empty" in line and "does not exist" in line and str(tmp_path / "data") in line
    assert "docquery ingest" in line and "DOCQUERY_DATA_DIR" in line
    assert not (tmp_path / "data").exists()  # no empty collection is created


def test_ask_on_an_empty_collection_says_so(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "none")
    build_index(settings, ModelStandIn()).close()  # the collection exists, with nothing in it
    got = _ask(tmp_path)
    assert got.returncode == EXIT_EMPTY
    assert "holds no documents" in _one_line(got)


@pytest.mark.parametrize("value", ["0", "-1", "51", "1000"])
def test_top_k_is_bounded_like_the_api(tmp_path: Path, value: str) -> None:
    got = _ask(tmp_path, "--top-k", value)
    assert got.returncode == EXIT_USAGE
    assert "--top-k: must be between 1 and 50" in _one_line(got)


def test_top_k_bound_follows_the_setting(tmp_path: Path) -> None:
    got = _ask(tmp_path, "--top-k", "11", DOCQUERY_RETRIEVAL__MAX_TOP_K="10")
    assert got.returncode == EXIT_USAGE and "between 1 and 10" in _one_line(got)
    # In range, the next check (the missing index) speaks instead.
    assert _ask(tmp_path, "--top-k", "10", DOCQUERY_RETRIEVAL__MAX_TOP_K="10").returncode == EXIT_EMPTY


LONG_NAME = "a-rather-long-file-name-about-the-leave-policy-of-the-company.txt"
SENTENCE = "The leave policy grants twenty-eight days of paid annual leave to every member of staff each year."


@pytest.fixture(scope="module")
def leave_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding one ingested file, for the module (an ingest process loads the model)."""
    tmp_path = tmp_path_factory.mktemp("leave")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / LONG_NAME).write_text(SENTENCE + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(DOCQUERY_DATA_DIR=str(tmp_path / "data"), DOCQUERY_SECRETS_DIR=str(tmp_path / "none"))
    ingest = [sys.executable, "-m", "docquery.cli", "ingest", str(corpus), "--groups", "staff"]
    subprocess.run(ingest, env=env, capture_output=True, text=True, timeout=300, check=True)
    return tmp_path


@pytest.mark.model
def test_piped_answers_and_citations_are_whole_lines(leave_policy: Path) -> None:
    # A pipe or a log gets each line whole, not cut at 80 columns.
    got = _ask(leave_policy)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert any(SENTENCE in line for line in lines), got.stdout
    assert any(LONG_NAME in line for line in lines)
    assert max(len(line) for line in lines) > 80


@pytest.mark.model
def test_ask_on_a_terminal_renders_the_answer_and_citations(leave_policy: Path) -> None:
    # On a terminal the answer is rendered markdown and citation fields are decoded text; run as
    # ``python -m docquery.cli``, whose module body runs main() when it reaches the end.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    data, secrets = leave_policy / "data", leave_policy / "none"
    env.update(DOCQUERY_DATA_DIR=str(data), DOCQUERY_SECRETS_DIR=str(secrets), COLUMNS="200")
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "docquery.cli", "ask", "What is the leave policy?", "--as-groups", "staff"],
            env=env, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
        )  # fmt: skip
        os.close(secondary)
        out = b""
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            out += data
        assert proc.wait(timeout=120) == 0, out.decode(errors="replace")
    finally:
        os.close(primary)
    text = out.decode(errors="replace")
    assert "Traceback" not in text
    assert "twenty-eight days" in text and LONG_NAME in text
