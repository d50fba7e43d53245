"""One table of request bounds, run through docquery.validation, ``docquery ask`` and ``POST /v1/query``:
the same inputs pass or fail the same way everywhere, and no refusal quotes the input."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery import validation
from docquery.cli import main
from docquery.config.settings import Settings
from tests.support.api_harness import Harness, bearer

AUTH = bearer("tok-alice-eng")
MAX_Q, MAX_K = 2000, 50  # the defaults of DOCQUERY_API__MAX_QUESTION_CHARS and DOCQUERY_RETRIEVAL__MAX_TOP_K
EXIT_USAGE, EXIT_EMPTY = 2, 4

# (question, top_k, the field refused or None, the reason's opening)
CASES: list[tuple[str, int | None, str | None, str]] = [
    ("What is the leave policy?", None, None, ""),
    ("  What is the leave policy?\n", 5, None, ""),
    ("q" * MAX_Q, 1, None, ""),
    ("Q" + " " * (MAX_Q - 1), MAX_K, None, ""),
    ("", None, "question", "must not be blank"),
    ("   ", None, "question", "must not be blank"),
    ("\n\t\r", None, "question", "must not be blank"),
    ("q" * (MAX_Q + 1), None, "question", f"longer than {MAX_Q} characters"),
    (" " * MAX_Q + "CANARY-q", None, "question", f"longer than {MAX_Q} characters"),
    ("What is the leave policy?", 0, "top_k", f"must be between 1 and {MAX_K}"),
    ("What is the leave policy?", -3, "top_k", f"must be between 1 and {MAX_K}"),
    ("What is the leave policy?", MAX_K + 1, "top_k", f"must be between 1 and {MAX_K}"),
]
CLI_FIELD = {"question": "the question", "top_k": "--top-k"}


@pytest.fixture(scope="module")
def h(shared_harness: Harness) -> Harness:
    shared_harness.corpus.add("vac", ["The vacation policy grants 25 days of paid leave."], ["eng"])
    return shared_harness


@pytest.mark.parametrize(("question", "top_k", "field", "reason"), CASES)
def test_the_module(question: str, top_k: int | None, field: str | None, reason: str) -> None:
    settings = Settings()
    if field is None:
        assert validation.question(question, settings) == question.strip()
        assert 1 <= validation.top_k(top_k, settings) <= MAX_K
        return
    with pytest.raises(validation.InvalidRequest) as refused:
        validation.question(question, settings)
        validation.top_k(top_k, settings)
    assert refused.value.field == field and refused.value.reason.startswith(reason)


@pytest.mark.parametrize(("question", "top_k", "field", "reason"), CASES)
def test_the_api(h: Harness, question: str, top_k: int | None, field: str | None, reason: str) -> None:
    body: dict[str, object] = {"question": question} | ({"top_k": top_k} if top_k is not None else {})
    r = h.client.post("/v1/query", json=body, headers=AUTH)
    if field is None:
        assert r.status_code == 200, r.text
        return
    assert r.status_code == 422
    message = r.json()["error"]["message"]
    # pydantic's schema bounds (min_length, ge) answer first for some inputs; both name the field only.
    assert message.startswith(f"invalid request: {field}: ")
    assert len(question.strip()) < 5 or question.strip()[:20] not in message


@pytest.mark.parametrize("case", CASES)
def test_the_cli(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[str, int | None, str | None, str],
) -> None:
    question, top_k, field, reason = case
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "none"))
    code = main(["ask", question, "--as-groups", "eng", *(["--top-k", str(top_k)] if top_k is not None else [])])
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    if field is None:
        assert code == EXIT_EMPTY and "the index is empty" in err  # past every check; nothing is indexed here
        return
    assert code == EXIT_USAGE
    assert err.startswith(f"docquery: {CLI_FIELD[field]}: {reason}")
    assert len(question.strip()) < 5 or question.strip()[:20] not in err


@pytest.mark.parametrize("raw", [b"\xff", b"What is \xc3", b"\xed\xa0\x80 leave"])
def test_undecodable_command_line_bytes_are_refused_like_the_apis_lone_surrogates(
    h: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raw: bytes
) -> None:
    # Python hands such argv bytes over as lone surrogates; the API's JSON can carry one as "\ud800".
    question = raw.decode("utf-8", errors="surrogateescape")
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "none"))
    assert main(["ask", question, "--as-groups", "eng"]) == EXIT_USAGE
    assert capsys.readouterr().err == "docquery: the question: not valid Unicode text\n"
    r = h.client.post(
        "/v1/query", content=b'{"question": "\\ud800 leave"}', headers={**AUTH, "content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("invalid request: question: ")
