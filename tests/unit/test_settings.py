"""Settings: profiles, nesting, no secret in the model, invalid values named without their value."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery.config.settings import Profile, Settings, SettingsError


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


def test_the_model_holds_no_secret(secrets_dir: Path) -> None:
    """Secrets are read through docquery.secrets on use; settings never carry a copy."""
    (secrets_dir / "llm-api-key").write_text("sk-super-secret-value")
    s = Settings(secrets_dir=secrets_dir)
    assert "sk-super-secret-value" not in repr(s)
    assert "sk-super-secret-value" not in s.model_dump_json()
    dumped = s.model_dump()
    assert all("api_key" not in section for section in dumped.values() if isinstance(section, dict))


def test_nested_json_form_is_read_for_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCQUERY_LLM", '{"base_url": "http://vllm:8000/v1", "model": "m"}')
    s = Settings(secrets_dir=tmp_path)
    assert s.llm.base_url == "http://vllm:8000/v1"
    assert s.llm.model == "m"


def test_invalid_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="top_k"):
        Settings(secrets_dir=tmp_path, retrieval={"top_k": 0})


def test_invalid_value_error_does_not_echo_the_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCQUERY_METRICS_PORT", "not-a-port-SECRETISH")
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    assert "DOCQUERY_METRICS_PORT" in str(info.value)
    assert "SECRETISH" not in str(info.value)


@pytest.mark.parametrize(("top_k", "max_top_k", "ok"), [(5, 50, True), (5, 5, True), (10, 5, False), (50, 49, False)])
def test_a_default_top_k_above_the_bound_is_refused_not_cut(top_k: int, max_top_k: int, ok: bool) -> None:
    retrieval = {"top_k": top_k, "max_top_k": max_top_k}
    if ok:
        assert Settings(retrieval=retrieval).retrieval.top_k == top_k
    else:
        with pytest.raises(SettingsError, match=rf"DOCQUERY_RETRIEVAL__TOP_K \({top_k}\) is larger than"):
            Settings(retrieval=retrieval)


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("DOCQUERY_QDRANT__OVERSAMPLING", "abc", "DOCQUERY_QDRANT__OVERSAMPLING: Input should be a valid number"),
        (
            "docquery_qdrant__oversampling",
            "0",
            "docquery_qdrant__oversampling: Input should be greater than or equal to 1",
        ),
        ("DOCQUERY_QDRANT", '{"oversampling": "abc"}', "DOCQUERY_QDRANT (key 'oversampling'): Input should be"),
        ("DOCQUERY_API__LINK_ALLOWLIST", "[1]", "DOCQUERY_API__LINK_ALLOWLIST item 0: Input should be a valid string"),
        ("DOCQUERY_METRICS_PORT", "-1", "DOCQUERY_METRICS_PORT: Input should be greater than or equal to 0"),
    ],
)
def test_an_invalid_value_names_the_variable_the_user_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    assert str(info.value).startswith(f"invalid settings: {named}")
    assert "qdrant.oversampling" not in str(info.value)


def test_a_validator_that_names_its_variables_is_not_prefixed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCQUERY_QDRANT__COLLECTION", "../x")
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    assert str(info.value).startswith("invalid settings: DOCQUERY_QDRANT__COLLECTION must be 1 to 64")
