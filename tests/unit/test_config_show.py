"""`docquery config show` prints every effective setting with its source; secrets are redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docquery.cli import main
from docquery.config.settings import setting_fields

CANARY = "sk-canary-5d1e-never-printed"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(secrets))
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    return secrets


def _show(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, dict[str, str]]]:
    assert main(["config", "show", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    return {part: {row["name"]: row for row in body[part]} for part in ("settings", "secrets")}


def test_every_setting_with_its_value_and_source(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("docquery_llm__model", "served-model")  # any case, as pydantic-settings reads it
    monkeypatch.setenv("DOCQUERY_RETRIEVAL", json.dumps({"top_k": 7}))
    shown = _show(capsys)["settings"]
    assert set(shown) == {envvar for _, envvar, _ in setting_fields()}
    assert shown["DOCQUERY_LLM__MODEL"] == {
        "name": "DOCQUERY_LLM__MODEL",
        "value": "served-model",
        "source": "env docquery_llm__model",
    }
    assert shown["DOCQUERY_RETRIEVAL__TOP_K"]["value"] == "7"
    assert shown["DOCQUERY_RETRIEVAL__TOP_K"]["source"] == "env DOCQUERY_RETRIEVAL (JSON)"
    assert shown["DOCQUERY_SECRETS_DIR"]["value"] == str(env)
    assert shown["DOCQUERY_LLM__TEMPERATURE"] == {
        "name": "DOCQUERY_LLM__TEMPERATURE",
        "value": "0.1",
        "source": "default",
    }


def test_secrets_are_redacted_and_say_where_they_come_from(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (env / "llm-api-key").write_text(CANARY)
    monkeypatch.setenv("DOCQUERY_QDRANT__API_KEY", CANARY + "-env")  # dev fallback
    monkeypatch.setenv("DOCQUERY_LLM__BASE_URL", f"https://user:{CANARY}@vllm:8000/v1")  # a key in the wrong place
    assert main(["config", "show"]) == 0
    out = capsys.readouterr()
    assert CANARY not in out.out + out.err
    shown = _show(capsys)
    assert shown["secrets"]["llm-api-key"]["value"] == "<redacted>"
    assert shown["secrets"]["llm-api-key"]["source"] == f"secret file {env / 'llm-api-key'}"
    assert shown["secrets"]["qdrant-api-key"]["source"] == "env var DOCQUERY_QDRANT__API_KEY"
    assert shown["secrets"]["embedder-api-key"]["value"] == "(not set)"
    assert shown["settings"]["DOCQUERY_LLM__BASE_URL"]["value"] == "https://user:<redacted>@vllm:8000/v1"


def test_text_output_lists_settings_then_secrets(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert out.index("# settings") < out.index("DOCQUERY_PROFILE") < out.index("# secrets") < out.index("\njwks.json ")
