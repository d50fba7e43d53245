"""``ask`` refuses what ``ingest`` refuses, in one line and exit 2, before it looks at the index:
group names outside GROUP_PATTERN (no document can carry them, so the caller would quietly see
nothing) and an empty question."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery.cli import main
from docquery.core.collection import GROUP_PATTERN

EXIT_USAGE = 2


@pytest.fixture
def data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(data))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "none"))
    return data


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("groups", "which"), [("a b", 1), ("staff,hr team", 2), ("staff,-x", 2), ("é", 1), ("x" * 129, 1)]
)
def test_a_group_name_ingest_would_refuse_is_refused(
    data_dir: Path, capsys: pytest.CaptureFixture[str], groups: str, which: int
) -> None:
    assert main(["ask", "What is the leave policy?", "--as-groups", groups]) == EXIT_USAGE
    line = _one_line(capsys)
    assert line == f"docquery: --as-groups: group {which} is not a valid group name (pattern {GROUP_PATTERN})\n"
    assert not data_dir.exists()


def test_the_public_label_is_not_a_group(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "What is the leave policy?", "--as-groups", "staff,__public__"]) == EXIT_USAGE
    assert "'__public__' is a reserved label" in _one_line(capsys)


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_an_empty_question_is_refused(data_dir: Path, capsys: pytest.CaptureFixture[str], question: str) -> None:
    assert main(["ask", question, "--as-groups", "staff"]) == EXIT_USAGE
    assert _one_line(capsys).startswith("docquery: the question: must not be blank; give it as the first argument")
    assert not data_dir.exists()


# (question length, DOCQUERY_API__MAX_QUESTION_CHARS or None for the default 2000, refused)
QUESTION_BOUNDS = [(2001, None, True), (2000, None, False), (11, "10", True), (10, "10", False)]


@pytest.mark.parametrize("case", QUESTION_BOUNDS)
def test_a_question_past_the_apis_bound_is_refused(
    data_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[int, str | None, bool],
) -> None:
    """`ask` answers what the service would, so it takes the API's bound (a new user asked 3,000 characters)."""
    length, limit, refused = case
    if limit is not None:
        monkeypatch.setenv("DOCQUERY_API__MAX_QUESTION_CHARS", limit)
    code = main(["ask", "q" * length, "--as-groups", "staff"])
    line = _one_line(capsys)
    if refused:
        assert code == EXIT_USAGE and "the question: longer than" in line and "q" * 10 not in line
    else:
        assert code == 4 and "the index is empty" in line  # past the check: nothing is indexed here


@pytest.mark.parametrize("groups", ["", "staff", "staff, hr", "staff,,hr", "cn=hr,ou=x", "/org/hr", "a@b.c"])
def test_valid_groups_get_past_the_check(data_dir: Path, capsys: pytest.CaptureFixture[str], groups: str) -> None:
    # "cn=hr,ou=x" is two names after the comma split, both valid. Nothing is indexed: exit 4, the index is empty.
    assert main(["ask", "What is the leave policy?", "--as-groups", groups]) == 4
    assert "the index is empty" in _one_line(capsys)
