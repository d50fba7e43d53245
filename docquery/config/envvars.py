"""What the ``DOCQUERY_*`` environment holds: which variables carry a secret, which are unknown.

Pure functions over a mapping of variables; they import nothing else of the project, so
both the settings model and the secret source use them without importing each other.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "DOCQUERY_"
NESTED_DELIMITER = "__"
SECRET_ENV_PREFIX = f"{ENV_PREFIX}SECRET{NESTED_DELIMITER}"

# Contract secret file (CONTRACT.md) -> (settings section, key) of its dev-only env fallback.
SECRET_FILES: dict[str, tuple[str, str]] = {
    "llm-api-key": ("llm", "api_key"),
    "qdrant-api-key": ("qdrant", "api_key"),
    "embedder-api-key": ("embedder", "api_key"),
}

# Keys that carry a credential wherever they appear, compared without case, "_" or "-".
_SECRET_KEYS = frozenset({"apikey", "readonlyapikey", "token", "password", "secret", "secretid"})
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")


def contract_secret_env_var(filename: str) -> str:
    """The dev fallback variable of a contract secret (``llm-api-key`` -> ``DOCQUERY_LLM__API_KEY``)."""
    section, key = SECRET_FILES[filename]
    return f"{ENV_PREFIX}{section}{NESTED_DELIMITER}{key}".upper()


def env_var_for(name: str) -> str:
    """The dev fallback variable of any secret: contract names as above, ``x-y.json`` -> ``DOCQUERY_SECRET__X_Y``."""
    if name in SECRET_FILES:
        return contract_secret_env_var(name)
    stem = name.removesuffix(".json")
    return SECRET_ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", stem).upper()


def _norm(part: str) -> str:
    return re.sub(r"[_\-\s]", "", part).lower()


def _path(var: str) -> list[str] | None:
    """``DOCQUERY_LLM__API_KEY`` (any case) -> ``["llm", "api_key"]``; None for other variables."""
    if not var.upper().startswith(ENV_PREFIX):
        return None
    return var[len(ENV_PREFIX) :].lower().split(NESTED_DELIMITER)


def _json_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from _json_keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _json_keys(inner)


def _value_carries_secret(value: str) -> bool:
    text = value.strip()
    if not text.startswith(("{", "[")):
        return False
    try:
        parsed = json.loads(text)
    except ValueError:
        # Structured but not JSON (`{'api_key': …}`): any credential word counts, a false alarm is cheap.
        return any(_norm(word) in _SECRET_KEYS for word in _WORD.findall(text))
    return any(_norm(key) in _SECRET_KEYS for key in _json_keys(parsed))


def carries_secret(var: str, value: str) -> bool:
    """Whether a ``DOCQUERY_*`` variable delivers a credential, in whatever form.

    Forms: the nested name (``DOCQUERY_LLM__API_KEY``, any case or separator spelling),
    ``DOCQUERY_SECRET__*``, and a JSON value of a section (``DOCQUERY_QDRANT='{"api_key": …}'``,
    the form pydantic-settings accepts for nested models) with a credential key at any depth.
    """
    path = _path(var)
    if path is None:
        return False
    if _norm(path[0]) == "secret" and len(path) > 1:
        return True
    if len(path) > 1 and _norm(path[-1]) in _SECRET_KEYS:
        return True
    return _value_carries_secret(value)


def secret_env_vars(environ: Mapping[str, str]) -> list[str]:
    """Names of the set variables that carry a secret, sorted."""
    return sorted(var for var, value in environ.items() if carries_secret(var, value))


def fallback_env_var(environ: Mapping[str, str], name: str) -> str | None:
    """The variable (as spelled in ``environ``) that holds secret ``name``'s documented dev fallback."""
    wanted = env_var_for(name)
    return next((var for var in sorted(environ) if var.upper() == wanted), None)


# -- unknown variables -----------------------------------------------------------
@dataclass(frozen=True)
class UnknownVariable:
    name: str
    suggestion: str | None  # the closest real variable, when one is close

    def message(self, *, refused: bool = False) -> str:
        hint = f"; did you mean {self.suggestion}?" if self.suggestion else ""
        outcome = "refused in the prod profile" if refused else "ignored"
        return f"{self.name} is not a DocQuery setting and is {outcome}{hint}"


def _spellings(var: str) -> str:
    """Compare names without case or separators, so ``DATADIR`` meets ``DATA_DIR``."""
    return re.sub(r"[^A-Z0-9]", "", var.upper())


def unknown_env_vars(known: Iterable[str], environ: Mapping[str, str]) -> list[UnknownVariable]:
    """Every ``DOCQUERY_*`` variable that is not in ``known`` (upper-case names), with a suggestion."""
    known_set = set(known)
    by_spelling = {_spellings(k): k for k in known_set}
    out: list[UnknownVariable] = []
    for var in sorted(environ):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known_set or upper.startswith(SECRET_ENV_PREFIX):
            continue
        suggestion = by_spelling.get(_spellings(upper))
        if suggestion is None:
            close = difflib.get_close_matches(upper, known_set, n=1, cutoff=0.75)
            suggestion = close[0] if close else None
        out.append(UnknownVariable(var, suggestion))
    return out
