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


def describe_validation_error(exc: ValidationError, environ: Mapping[str, str]) -> str:
    """Each problem as the variable the user set and pydantic's reason (which states a field's bounds).

    Never the value: pydantic's own text embeds the input, which may be a secret.
    """
    problems = []
    for err in exc.errors():
        reason = err["msg"].removeprefix("Value error, ")  # a validator's own message says what to do
        where = _set_by(tuple(str(p) for p in err["loc"]), environ)
        # A validator's message names its variables already (a section's checks span several fields).
        problems.append(reason if where is None or ENV_PREFIX in reason else f"{where}: {reason}")
    return "invalid settings: " + "; ".join(problems)


def _set_by(loc: tuple[str, ...], environ: Mapping[str, str]) -> str | None:
    """The variable (or key of a section's JSON) that set the field at ``loc``, as the user spelled it.

    The nested variable wins over the section's JSON, as in pydantic-settings. Without either (a value
    passed in code, or a section's own check), the dotted path; None for an error of the whole model.
    """
    if not loc:
        return None
    rest = f" item {'.'.join(loc[2:])}" if len(loc) > 2 else ""
    nested = _spelled(environ, (ENV_PREFIX + NESTED_DELIMITER.join(loc[:2])).upper())
    if nested:
        return nested + rest
    section = _spelled(environ, (ENV_PREFIX + loc[0]).upper())
    if section and len(loc) > 1:
        return f"{section} (key {loc[1]!r}){rest}"
    return section or ".".join(loc)


def _spelled(environ: Mapping[str, str], var: str) -> str | None:
    """``var`` as spelled in ``environ`` (pydantic-settings matches without regard to case), if set."""
    return next((name for name in environ if name.upper() == var), None)
