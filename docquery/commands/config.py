"""`docquery config show` (the effective settings and where each came from, secrets redacted) and
`docquery config reference` (docs/settings.md, generated from the settings model so it cannot drift)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic.fields import FieldInfo

from docquery.config.envvars import ENV_PREFIX, NESTED_DELIMITER, SECRET_FILES, env_var_for, fallback_env_var
from docquery.config.settings import Profile, Settings, setting_fields
from docquery.secrets import FileSecretSource, check_secret_name, secret_origin

REDACTED = "<redacted>"


@dataclass(frozen=True)
class Row:
    name: str  # the env var, or the secret's file name
    value: str
    source: str


# -- config show -----------------------------------------------------------------
def _redact_url(text: str) -> str:
    """A password in a URL's userinfo is a secret that was put in the wrong place: never print it."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if parts.scheme and parts.password is not None:
        host = parts.hostname or ""
        netloc = f"{parts.username}:{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return text


def _display(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    return _redact_url(str(value))


def _env_lookup(environ: Mapping[str, str], wanted: str) -> str | None:
    return next((var for var in sorted(environ) if var.upper() == wanted), None)


def _source_of(path: str, env: str, environ: Mapping[str, str]) -> str:
    var = _env_lookup(environ, env)
    if var is not None:
        return f"env {var}"
    if "." in path:
        section, key = path.split(".", 1)
        section_var = _env_lookup(environ, f"{ENV_PREFIX}{section}".upper())
        if section_var is not None:
            try:
                body = json.loads(environ[section_var])
            except ValueError:
                body = None
            if isinstance(body, dict) and key in body:
                return f"env {section_var} (JSON)"
    return "default"


def _value_at(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


def setting_rows(settings: Settings, environ: Mapping[str, str]) -> list[Row]:
    return [
        Row(env, _display(_value_at(settings, path)), _source_of(path, env, environ))
        for path, env, _ in setting_fields()
    ]


def secret_names(settings: Settings) -> list[str]:
    return [*SECRET_FILES, settings.auth.api_keys_file, settings.auth.jwks_file]


def secret_rows(settings: Settings, environ: Mapping[str, str]) -> list[Row]:
    """Whether each secret is there and where it is read from; never its value, and no Vault round trip."""
    rows = []
    files = FileSecretSource(settings.secrets_dir)
    for name in secret_names(settings):
        try:
            check_secret_name(name)
        except ValueError:
            rows.append(Row(name, "(invalid name)", "refused"))
            continue
        origin = secret_origin(settings, name, environ)
        if settings.vault.url:
            rows.append(Row(name, "(not read by config show)", origin))
        elif files.version(name) is not None:
            rows.append(Row(name, REDACTED, origin))
        elif (var := fallback_env_var(environ, name)) is not None:
            refused = settings.profile == Profile.PROD
            rows.append(Row(name, "(refused in prod)" if refused else REDACTED, f"env var {var}"))
        else:
            rows.append(Row(name, "(not set)", origin))
    return rows


def render_show(settings: Settings, environ: Mapping[str, str], *, as_json: bool = False) -> str:
    settings_part, secrets_part = setting_rows(settings, environ), secret_rows(settings, environ)
    if as_json:
        body = {"settings": [asdict(r) for r in settings_part], "secrets": [asdict(r) for r in secrets_part]}
        return json.dumps(body, indent=2) + "\n"
    lines = []
    for title, rows in (("settings", settings_part), ("secrets", secrets_part)):
        width = max(len(r.name) for r in rows)
        lines.append(f"# {title}")
        lines += [f"{r.name:<{width}}  {r.value}  [{r.source}]" for r in rows]
    return "\n".join(lines) + "\n"


# -- config reference ---------------------------------------------------------------
def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        named = [_type_name(a) for a in args if a is not type(None)]
        return " | ".join(named) + (" (optional)" if type(None) in args else "")
    if origin is list:
        return f"JSON list of {_type_name(args[0])}"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " | ".join(f"`{m.value}`" for m in annotation)
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(field: FieldInfo) -> str:
    parts = []
    for meta in field.metadata:  # pydantic's annotated-types bounds: Ge(ge=1), Le(le=50), ...
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    return "(unset)" if value is None else f"`{_display(value)}`"


_INTRO = """\
# Settings reference

<!-- Generated from docquery/config/settings.py by `docquery config reference > docs/settings.md`; do not edit.
     tests/unit/test_settings_reference.py fails when this file and the model disagree. -->

Every setting is an environment variable with the prefix `DOCQUERY_`; `__` separates a section from its
field (`DOCQUERY_LLM__BASE_URL`). A whole section may also be set as one JSON object
(`DOCQUERY_LLM='{"base_url": "...", "model": "..."}'`). Names are matched without regard to case.

- A `DOCQUERY_*` variable that names no setting is a warning naming the closest real one
  (`DOCQUERY_DATADIR`: did you mean `DOCQUERY_DATA_DIR`?), and an error in the `prod` profile. So is a key of a
  section's JSON that names no field of it (`DOCQUERY_LLM`: unknown key `base_urll`; did you mean `base_url`?).
- `docquery config show` prints the effective value of every setting and where it came from (default or
  which variable), and for each secret whether it is set and where it is read from; never a secret's value.
- No setting holds a secret. Secrets are read on every use through one source, so a rotated one is used
  without a restart (see [Secrets](#secrets)).
"""

_SECRETS = """\
## Secrets

Read from the files in `DOCQUERY_SECRETS_DIR` (as the Vault Agent renders them), or from Vault's KV store when
`DOCQUERY_VAULT__URL` is set. In the `dev` profile only, a secret with no file may come from the variable named
below, with a warning. The `prod` profile refuses to start when any environment variable carries a secret, in
whatever form (`DOCQUERY_LLM__API_KEY`, `DOCQUERY_LLM='{"api_key": ...}'`, `DOCQUERY_SECRET__*`, any case),
naming the variable; and when a secret the configuration needs is missing, empty or a placeholder, naming
the secret file.

| secret file | needed when | dev-only variable |
|---|---|---|
"""

_NEEDED = {
    "llm-api-key": "`DOCQUERY_LLM__BASE_URL` is set",
    "qdrant-api-key": "`DOCQUERY_QDRANT__URL` is set",
    "embedder-api-key": "`DOCQUERY_EMBEDDER__KIND=openai`",
    "api-keys.json": "API-key authentication (`DOCQUERY_AUTH__API_KEYS_FILE`)",
    "jwks.json": "JWT authentication (`DOCQUERY_AUTH__JWKS_FILE`)",
}


def reference_markdown() -> str:
    out = [_INTRO.rstrip("\n")]
    current = None
    for path, env, field in setting_fields():
        section = path.split(".")[0] if "." in path else ""
        if section != current:
            current = section
            title = f"`{ENV_PREFIX}{section.upper()}{NESTED_DELIMITER}*`" if section else "Top level"
            out.append(f"\n## {title}\n\n| variable | type | default | description |\n|---|---|---|---|")
        kind = _type_name(field.annotation)
        bounds = _bounds(field)
        kind = f"{kind} ({bounds})" if bounds else kind
        out.append(f"| `{env}` | {_cell(kind)} | {_cell(_default(field))} | {_cell(field.description or '')} |")
    out.append("\n" + _SECRETS + "\n".join(f"| `{n}` | {w} | `{env_var_for(n)}` |" for n, w in _NEEDED.items()))
    return "\n".join(out) + "\n"


# -- the `config` command ---------------------------------------------------------
def _cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(render_show(settings, os.environ, as_json=args.json))
    return 0


def _cmd_reference(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(reference_markdown())
    return 0


def register(sub: Any) -> None:
    """Adds `docquery config show` and `docquery config reference` to the CLI's subcommands."""
    config = sub.add_parser("config", help="show the effective settings, or print the settings reference")
    actions = config.add_subparsers(dest="config_command", required=True)
    show = actions.add_parser("show", help="effective settings with their sources; secrets redacted")
    show.add_argument("--json", action="store_true", help="one JSON object instead of text")
    show.set_defaults(handler=_cmd_show)
    reference = actions.add_parser("reference", help="print docs/settings.md (Markdown) from the settings model")
    reference.set_defaults(handler=_cmd_reference)
