"""Settings: profiles, nesting, secrets from files, prod refusing env secrets, no secret in repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery.settings import Profile, Settings, SettingsError


def test_defaults_are_the_embedded_dev_profile(tmp_path: Path) -> None:
    s = Settings(secrets_dir=tmp_path)
    assert s.profile is Profile.DEV
    assert s.data_dir == Path("./.docquery")
    assert s.qdrant.url is None
    assert s.llm.base_url is None
    assert s.metrics_port == 9464


def test_env_prefix_and_double_underscore_nesting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("DOCQUERY_QDRANT__URL", "http://qdrant:6333")
    monkeypatch.setenv("DOCQUERY_LLM__BASE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("DOCQUERY_LLM__MODEL", "served-model")
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path))
    s = Settings()
    assert s.data_dir == tmp_path / "d"
    assert s.qdrant.url == "http://qdrant:6333"
    assert s.llm.base_url == "http://vllm:8000/v1"
    assert s.llm.model == "served-model"


def test_secrets_are_read_from_files_in_the_secrets_dir(secrets_dir: Path) -> None:
    (secrets_dir / "llm-api-key").write_text("llm-key-from-vault\n")
    (secrets_dir / "qdrant-api-key").write_text("qdrant-key-from-vault")
    s = Settings(secrets_dir=secrets_dir)
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "llm-key-from-vault"
    assert s.qdrant.api_key is not None and s.qdrant.api_key.get_secret_value() == "qdrant-key-from-vault"


def test_secrets_dir_from_env(monkeypatch: pytest.MonkeyPatch, secrets_dir: Path) -> None:
    (secrets_dir / "llm-api-key").write_text("k1")
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(secrets_dir))
    s = Settings()
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "k1"


def test_repr_and_dump_show_no_secret(secrets_dir: Path) -> None:
    (secrets_dir / "llm-api-key").write_text("sk-super-secret-value")
    s = Settings(secrets_dir=secrets_dir)
    assert "sk-super-secret-value" not in repr(s)
    assert "sk-super-secret-value" not in str(s)
    assert "sk-super-secret-value" not in s.model_dump_json()


def test_dev_allows_env_secret_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, secrets_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DOCQUERY_LLM__API_KEY", "from-env")
    s = Settings(secrets_dir=secrets_dir)
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "from-env"
    assert any("DOCQUERY_LLM__API_KEY" in r.getMessage() for r in caplog.records)
    assert all("from-env" not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("var", ["DOCQUERY_LLM__API_KEY", "DOCQUERY_QDRANT__API_KEY", "DOCQUERY_EMBEDDER__API_KEY"])
def test_prod_refuses_env_secrets_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, secrets_dir: Path, var: str
) -> None:
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv(var, "leaky-value")
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=secrets_dir)
    assert var in str(info.value)
    assert "leaky-value" not in str(info.value)


def test_prod_accepts_secrets_from_files(monkeypatch: pytest.MonkeyPatch, secrets_dir: Path) -> None:
    (secrets_dir / "llm-api-key").write_text("a-real-key")
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_LLM__BASE_URL", "http://vllm:8000/v1")
    s = Settings(secrets_dir=secrets_dir)
    assert s.is_prod
    assert s.llm.api_key is not None


@pytest.mark.parametrize("content", [None, "", "changeme", "PLACEHOLDER"])
def test_prod_refuses_missing_or_placeholder_secrets(
    monkeypatch: pytest.MonkeyPatch, secrets_dir: Path, content: str | None
) -> None:
    if content is not None:
        (secrets_dir / "qdrant-api-key").write_text(content)
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_QDRANT__URL", "https://qdrant:6333")
    with pytest.raises(SettingsError, match="qdrant-api-key"):
        Settings(secrets_dir=secrets_dir)


def test_invalid_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="top_k"):
        Settings(secrets_dir=tmp_path, retrieval={"top_k": 0})
