"""Configuration errors in one line that names the variable and what to do, never the value.

Pure functions over pydantic's and pydantic-settings' errors; :mod:`docquery.config.settings` raises
what they return.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import SettingsError

from docquery.config.envvars import ENV_PREFIX, NESTED_DELIMITER

Field = tuple[str, str, FieldInfo]  # (dotted path, env var, field), as settings.setting_fields yields them


def describe_source_error(exc: SettingsError, environ: Mapping[str, str], fields: Iterable[Field]) -> str:
    """pydantic-settings could not parse a JSON value: name the variable the user set, not its value.

    It reports the top-level field (``api``) whether ``DOCQUERY_API`` or ``DOCQUERY_API__LINK_ALLOWLIST``
    was the bad one, so the variables set under that field are looked at to tell which.
    """
    match = re.search(r'field "([a-z_]+)"', str(exc))
    if match is None:
        return f"a {ENV_PREFIX}* variable is not valid JSON; fix its JSON"
    section = f"{ENV_PREFIX}{match.group(1)}".upper()
    section_message = f"{section} is not valid JSON; set its fields one by one ({section}__<FIELD>) or fix the JSON"
    if _not_json(environ, section):
        return section_message
    for _, env, field in fields:
        form = _json_form(field.annotation)
        if env.startswith(section + NESTED_DELIMITER) and form and (var := _not_json(environ, env)):
            return f"{var} must be {form}, e.g. '{_json_example(field)}'"
    return section_message


def _not_json(environ: Mapping[str, str], var: str) -> str | None:
    """``var`` as spelled in ``environ`` (matched without regard to case) when it is set and not valid JSON."""
    for name, value in environ.items():
        if name.upper() != var:
            continue
        try:
            json.loads(value)
        except ValueError:
            return name
    return None


def _json_form(annotation: Any) -> str | None:
    """What a field pydantic-settings reads as JSON must look like; None for a field read as plain text."""
    origin = typing.get_origin(annotation) or annotation
    if origin in (list, set, frozenset, tuple):
        return "a JSON list"
    if origin is dict or (isinstance(origin, type) and issubclass(origin, BaseModel)):
        return "a JSON object"
    return None


def _json_example(field: FieldInfo) -> str:
    """The field's documented example, else its default, else an empty value of its form."""
    if field.examples:
        return json.dumps(field.examples[0])
    default = field.get_default(call_default_factory=True)
    if default:
        return json.dumps(default)
    return "[]" if _json_form(field.annotation) == "a JSON list" else "{}"


def describe_validation_error(exc: ValidationError) -> str:
    """Locations and reasons only: pydantic's own text embeds the input, which may be a secret."""
    problems = [f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()]
    return "invalid settings: " + "; ".join(problems)
