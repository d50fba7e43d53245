"""A misspelt key in a section's JSON value (``DOCQUERY_LLM='{"base_urll": ...}'``) is treated as a misspelt
variable: a warning naming the key and the closest field, an error in prod."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from docquery.config.envvars import unknown_env_vars
from docquery.config.settings import Settings, SettingsError, known_env_vars, setting_fields

_SECTIONS = sorted({path.split(".")[0] for path, _, _ in setting_fields() if "." in path})
_FIELDS = [path.split(".") for path, _, _ in setting_fields() if "." in path]


def _typos(field: str) -> list[str]:
    """Misspellings a user makes: a doubled last letter, no separators, dashes for underscores."""
    variants = {field + field[-1], field.replace("_", ""), field.replace("_", "-")}
    return sorted(variants - {field})


# (section variable, key as typed, the field meant), for every field of every section.
TYPOS = [(f"DOCQUERY_{section.upper()}", typo, field) for section, field in _FIELDS for typo in _typos(field)]


def test_every_section_has_typos_to_check() -> None:
    assert {var for var, _, _ in TYPOS} == {f"DOCQUERY_{s.upper()}" for s in _SECTIONS}


@pytest.mark.parametrize("case", TYPOS, ids=["-".join(c) for c in TYPOS])
def test_dev_warns_naming_the_key_and_the_closest_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture, case: tuple[str, str, str]
) -> None:
    var, typed, meant = case
    monkeypatch.setenv(var, json.dumps({typed: "value-never-logged"}))
    with caplog.at_level(logging.WARNING, logger="docquery.config.settings"):
        Settings(secrets_dir=tmp_path)
    lines = [r.getMessage() for r in caplog.records if var in r.getMessage()]
    assert lines == [f"{var}: unknown key {typed!r} names no setting and is ignored; did you mean {meant!r}?"]
    assert "value-never-logged" not in caplog.text


@pytest.mark.parametrize(("var", "typed", "meant"), TYPOS)
def test_prod_refuses_naming_the_key_and_the_closest_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, var: str, typed: str, meant: str
) -> None:
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv(var, json.dumps({typed: "value-never-shown"}))
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    assert str(info.value) == (
        f"{var}: unknown key {typed!r} names no setting and is refused in the prod profile; did you mean {meant!r}?"
    )


@pytest.mark.parametrize("section", _SECTIONS)
def test_every_real_key_in_any_case_is_known(section: str) -> None:
    keys = [field for sec, field in _FIELDS if sec == section]
    env = {f"DOCQUERY_{section.upper()}": json.dumps({k: None for k in keys} | {k.upper(): None for k in keys})}
    assert unknown_env_vars(known_env_vars(), env) == []


def test_the_issue_examples(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_QDRANT", '{"urll": "http://x"}')
    with pytest.raises(SettingsError, match=r"DOCQUERY_QDRANT: unknown key 'urll' .* did you mean 'url'\?"):
        Settings(secrets_dir=tmp_path)
    monkeypatch.setenv("DOCQUERY_QDRANT", '{"url": "http://x"}')
    monkeypatch.setenv("DOCQUERY_LLM", '{"base_urll": "http://x"}')
    with pytest.raises(SettingsError, match=r"DOCQUERY_LLM: unknown key 'base_urll' .* did you mean 'base_url'\?"):
        Settings(secrets_dir=tmp_path)


def test_nested_models_are_checked_at_every_depth() -> None:
    # No section nests a model today; the check follows the known names, so a future one is covered.
    known = {"DOCQUERY_A", "DOCQUERY_A__B", "DOCQUERY_A__B__CHILD", "DOCQUERY_A__LEAF"}
    env = {"DOCQUERY_A": json.dumps({"leaf": 1, "b": {"child": 1, "chld": 2}, "leef": {"x": 1}})}
    found = [(u.name, u.key, u.suggestion) for u in unknown_env_vars(known, env)]
    assert found == [("DOCQUERY_A", "b.chld", "b.child"), ("DOCQUERY_A", "leef", "leaf")]


def test_a_leaf_whose_value_is_json_is_not_walked() -> None:
    env = {"DOCQUERY_LLM__MODEL": '{"anything": 1}', "DOCQUERY_API__LINK_ALLOWLIST": '["example.com"]'}
    assert unknown_env_vars(known_env_vars(), env) == []


def test_secret_keys_are_left_to_the_secret_source() -> None:
    # The key is no setting, but prod refuses it as a secret in the environment, naming it (docquery.secrets).
    env = {"DOCQUERY_LLM": '{"api_key": "sk-x", "base_url": "http://x"}'}
    assert unknown_env_vars(known_env_vars(), env) == []


@pytest.mark.parametrize("value", ['{"base_urll": ', "[1, 2]", '"text"', "plain"])
def test_malformed_or_non_object_json_is_left_to_pydantic(value: str) -> None:
    assert unknown_env_vars(known_env_vars(), {"DOCQUERY_LLM": value}) == []
