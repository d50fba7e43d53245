"""A misspelt DOCQUERY_* variable is a warning naming the closest setting, an error in prod."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from docquery.config.envvars import unknown_env_vars
from docquery.config.settings import Settings, SettingsError, known_env_vars

# (variable as the user typed it, the setting they meant)
MISSPELT = [
    ("DOCQUERY_DATADIR", "DOCQUERY_DATA_DIR"),
    ("DOCQUERY_LLM_BASE_URL", "DOCQUERY_LLM__BASE_URL"),
    ("DOCQUERY_LLM__BASEURL", "DOCQUERY_LLM__BASE_URL"),
    ("docquery_datadir", "DOCQUERY_DATA_DIR"),
    ("DOCQUERY_QDRANT_URL", "DOCQUERY_QDRANT__URL"),
    ("DOCQUERY_QDRANT__URI", "DOCQUERY_QDRANT__URL"),
    ("DOCQUERY_SECRET_DIR", "DOCQUERY_SECRETS_DIR"),
    ("DOCQUERY_LOGLEVEL", "DOCQUERY_LOG_LEVEL"),
    ("DOCQUERY_PROFIL", "DOCQUERY_PROFILE"),
    ("DOCQUERY_RETRIEVAL__TOPK", "DOCQUERY_RETRIEVAL__TOP_K"),
    ("DOCQUERY_INGEST__CHUNK_TOKEN", "DOCQUERY_INGEST__CHUNK_TOKENS"),
    ("DOCQUERY_EMBEDER__MODEL", "DOCQUERY_EMBEDDER__MODEL"),
    ("DOCQUERY_API__MAX-BODY-BYTES", "DOCQUERY_API__MAX_BODY_BYTES"),
    ("DOCQUERY_VAULT_KV_PATH", "DOCQUERY_VAULT__KV_PATH"),
]


@pytest.mark.parametrize(("typed", "meant"), MISSPELT)
def test_dev_warns_naming_the_variable_and_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture, typed: str, meant: str
) -> None:
    monkeypatch.setenv(typed, "value-never-logged")
    with caplog.at_level(logging.WARNING, logger="docquery.config.settings"):
        Settings(secrets_dir=tmp_path)
    lines = [r.getMessage() for r in caplog.records if typed in r.getMessage()]
    assert len(lines) == 1
    assert f"did you mean {meant}?" in lines[0]
    assert "value-never-logged" not in caplog.text


@pytest.mark.parametrize(("typed", "meant"), MISSPELT)
def test_prod_refuses_naming_the_variable_and_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, typed: str, meant: str
) -> None:
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv(typed, "value-never-shown")
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    assert typed in str(info.value)
    assert meant in str(info.value)
    assert "value-never-shown" not in str(info.value)


def test_a_far_off_name_gets_no_suggestion() -> None:
    [unknown] = unknown_env_vars(known_env_vars(), {"DOCQUERY_ZZZZZZZZZZZZZZZZ": "1"})
    assert unknown.suggestion is None
    assert "did you mean" not in unknown.message()


def test_every_real_setting_and_section_is_known(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert unknown_env_vars(known_env_vars(), {name: "x" for name in known_env_vars()}) == []
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_LLM__MODEL", "m")
    monkeypatch.setenv("docquery_data_dir", str(tmp_path))  # pydantic-settings reads any case
    assert Settings(secrets_dir=tmp_path).data_dir == tmp_path


def test_other_variables_are_not_ours() -> None:
    assert unknown_env_vars(known_env_vars(), {"HOME": "/root", "DOCQUERYX": "1", "PATH": "/bin"}) == []
