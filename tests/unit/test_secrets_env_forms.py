"""Prod refuses every environment variable that carries a secret, whatever its form.

Forms: the nested name (``DOCQUERY_LLM__API_KEY``), a section's JSON value (the form
pydantic-settings accepts for nested models, ``DOCQUERY_QDRANT='{"api_key": …}'``),
``DOCQUERY_SECRET__*``, in any case. Dev warns, naming the variable, and still reads
the documented fallback.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from docquery.cli import main
from docquery.config.envvars import carries_secret, secret_env_vars
from docquery.config.settings import Settings
from docquery.secrets import EnvSecretRefusedError, build_secret_source, refuse_env_secrets

VALUE = "sk-canary-7f3e-never-shown"
SECTIONS = ["llm", "qdrant", "embedder"]


def _any_case(text: str) -> st.SearchStrategy[str]:
    return st.tuples(*[st.sampled_from(sorted({c.lower(), c.upper()})) for c in text]).map("".join)


_key = st.sampled_from(["api_key", "apikey", "api-key", "read_only_api_key", "token", "password"]).flatmap(_any_case)
_prefix = _any_case("DOCQUERY_")
_section = st.sampled_from(SECTIONS).flatmap(_any_case)


@st.composite
def secret_vars(draw: st.DrawFn) -> tuple[str, str]:
    """A (variable, value) pair that delivers VALUE as a credential."""
    form = draw(st.sampled_from(["nested", "json", "json-deep", "json-list", "python-literal", "secret-prefix"]))
    prefix, section, key = draw(_prefix), draw(_section), draw(_key)
    if form == "nested":
        return f"{prefix}{section}__{key}", VALUE
    if form == "secret-prefix":
        return f"{prefix}{draw(_any_case('SECRET'))}__{draw(_any_case('api_keys'))}", VALUE
    body: object = {key: VALUE}
    if form == "json-deep":
        body = {"model": "m", "extra": {key: VALUE}}
    elif form == "json-list":
        body = [{"base_url": "http://x"}, {key: VALUE}]
    text = json.dumps(body, indent=draw(st.sampled_from([None, 2])))
    if form == "python-literal":
        text = f"{{'{key}': '{VALUE}', 'model': 'm'}}"
    return f"{prefix}{section}", draw(st.sampled_from(["", " ", "\n"])) + text


@hsettings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=secret_vars())
def test_prod_refuses_every_form_naming_the_variable(tmp_path: Path, pair: tuple[str, str]) -> None:
    var, value = pair
    assert carries_secret(var, value)
    settings = Settings(profile="prod", secrets_dir=tmp_path)
    with pytest.raises(EnvSecretRefusedError) as err:
        build_secret_source(settings, environ={var: value, "DOCQUERY_PROFILE": "prod"})
    assert err.value.variable == var
    assert var in str(err.value)
    assert VALUE not in str(err.value)


@hsettings(max_examples=100)
@given(pair=secret_vars())
def test_dev_warns_naming_the_variable_never_the_value(pair: tuple[str, str]) -> None:
    var, value = pair
    logger = logging.getLogger("docquery.secrets.env")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        refuse_env_secrets("dev", {var: value})
    finally:
        logger.removeHandler(handler)
    messages = [r.getMessage() for r in records]
    assert any(var in m for m in messages)
    assert all(VALUE not in m for m in messages)


# The reviewers' reproductions: each carried a key that prod accepted (or accepted and then dropped).
REPRODUCTIONS = [
    ("DOCQUERY_QDRANT", json.dumps({"url": "https://qdrant:6333", "api_key": VALUE})),
    ("DOCQUERY_LLM", json.dumps({"base_url": "http://vllm:8000/v1", "api_key": VALUE})),
    ("DOCQUERY_EMBEDDER", json.dumps({"kind": "openai", "api_key": VALUE})),
    ("DOCQUERY_LLM__API_KEY", VALUE),
    ("docquery_llm__api_key", VALUE),
    ("Docquery_Qdrant__Api_Key", VALUE),
    ("DOCQUERY_SECRET__API_KEYS", "[]"),
    ("DOCQUERY_QDRANT", '{"API_KEY": "' + VALUE + '"}'),
    ("DOCQUERY_LLM", '{"apiKey": "' + VALUE + '"}'),
    ("DOCQUERY_LLM", "{'api_key': '" + VALUE + "'}"),
]


@pytest.mark.parametrize(("var", "value"), REPRODUCTIONS)
def test_cli_in_prod_refuses_to_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], var: str, value: str
) -> None:
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path))
    monkeypatch.setenv(var, value)
    assert main(["ask", "anything", "--as-groups", "staff"]) == 2
    err = capsys.readouterr().err
    assert var in err
    assert VALUE not in err
    assert len(err.strip().splitlines()) == 1


# Variables that name no credential are not refused, whatever their case or form.
NOT_SECRETS = [
    ("DOCQUERY_LLM", json.dumps({"base_url": "http://vllm:8000/v1", "model": "m"})),
    ("DOCQUERY_AUTH__API_KEYS_FILE", "api-keys.json"),
    ("docquery_auth__api_keys_file", "keys.json"),
    ("DOCQUERY_AUTH__JWT_ALGORITHMS", '["RS256"]'),
    ("DOCQUERY_SECRETS_DIR", "/vault/secrets"),
    ("DOCQUERY_VAULT__JWT_PATH", "/var/run/secrets/vault/token"),
    ("DOCQUERY_API__LINK_ALLOWLIST", '["docs.example.com"]'),
    ("DOCQUERY_LLM__MODEL", "api_key: not a JSON object"),
    ("DOCQUERY_QDRANT__URL", "https://qdrant:6333"),
    ("HOME_API_KEY", VALUE),
]


@pytest.mark.parametrize(("var", "value"), NOT_SECRETS)
def test_variables_without_a_credential_are_not_refused(var: str, value: str) -> None:
    assert secret_env_vars({var: value}) == []
    refuse_env_secrets("prod", {var: value})


def test_dev_still_reads_the_documented_fallback(tmp_path: Path) -> None:
    env = {"DOCQUERY_LLM__API_KEY": VALUE, "docquery_qdrant__api_key": "q-" + VALUE}
    source = build_secret_source(Settings(secrets_dir=tmp_path), environ=env)
    llm, qdrant = source.get_text("llm-api-key"), source.get_text("qdrant-api-key")
    assert llm is not None and llm.get_secret_value() == VALUE
    assert qdrant is not None and qdrant.get_secret_value() == "q-" + VALUE


def test_dev_does_not_read_the_json_form_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    env = {"DOCQUERY_LLM": json.dumps({"api_key": VALUE})}
    with caplog.at_level(logging.WARNING):
        source = build_secret_source(Settings(secrets_dir=tmp_path), environ=env)
    assert source.get_text("llm-api-key") is None
    assert "DOCQUERY_LLM carries a secret in a form DocQuery does not read" in caplog.text
    assert VALUE not in caplog.text
