"""A value pydantic-settings must decode as JSON and cannot is reported on the variable the user set.

``DOCQUERY_API__LINK_ALLOWLIST=example.com`` used to be reported as "DOCQUERY_API is not valid JSON",
a variable nobody had set.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from docquery.config.settings import Settings, SettingsError, setting_fields

# Every field pydantic-settings reads as JSON when set one by one (DOCQUERY_<SECTION>__<FIELD>).
JSON_FIELDS = [
    env for path, env, field in setting_fields() if "." in path and typing.get_origin(field.annotation) is list
]
SECTIONS = sorted({f"DOCQUERY_{path.split('.')[0].upper()}" for path, _, _ in setting_fields() if "." in path})
NOT_JSON = ["example.com", "[x", "a, b", "{"]


def test_the_json_fields_are_found() -> None:
    assert {"DOCQUERY_API__LINK_ALLOWLIST", "DOCQUERY_AUTH__JWT_ALGORITHMS"} <= set(JSON_FIELDS)


@pytest.mark.parametrize("value", NOT_JSON)
@pytest.mark.parametrize("var", JSON_FIELDS)
def test_a_field_that_is_not_json_is_named_with_its_form(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    message = str(info.value)
    assert message.startswith(f"{var} must be a JSON list, e.g. '[")
    assert "\n" not in message
    assert value not in message.replace("example.com", "")  # the field's example, never the value set


def test_the_examples_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var, example in [
        ("DOCQUERY_API__LINK_ALLOWLIST", "'[\"example.com\"]'"),
        ("DOCQUERY_AUTH__JWT_ALGORITHMS", '\'["RS256", "ES256"]\''),
    ]:
        monkeypatch.setenv(var, "not-json")
        with pytest.raises(SettingsError) as info:
            Settings(secrets_dir=tmp_path)
        assert str(info.value) == f"{var} must be a JSON list, e.g. {example}"
        monkeypatch.delenv(var)


def test_the_variable_is_named_as_spelled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("docquery_api__link_allowlist", "example.com")
    with pytest.raises(SettingsError, match=r"^docquery_api__link_allowlist must be a JSON list"):
        Settings(secrets_dir=tmp_path)


@pytest.mark.parametrize("value", ["{bad", "{'url': 'x'}", "not json"])
@pytest.mark.parametrize("section", SECTIONS)
def test_a_bad_section_json_keeps_the_section_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, section: str, value: str
) -> None:
    monkeypatch.setenv(section, value)
    with pytest.raises(SettingsError) as info:
        Settings(secrets_dir=tmp_path)
    assert str(info.value) == (
        f"{section} is not valid JSON; set its fields one by one ({section}__<FIELD>) or fix the JSON"
    )


def test_a_good_section_json_beside_a_bad_field_names_the_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCQUERY_API", '{"max_body_bytes": 2048}')
    monkeypatch.setenv("DOCQUERY_API__LINK_ALLOWLIST", "example.com")
    with pytest.raises(SettingsError, match=r"^DOCQUERY_API__LINK_ALLOWLIST must be a JSON list"):
        Settings(secrets_dir=tmp_path)


def test_a_json_list_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCQUERY_API__LINK_ALLOWLIST", '["example.com"]')
    assert Settings(secrets_dir=tmp_path).api.link_allowlist == ["example.com"]
