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

# Contract secret file (docs/contract.md) -> (settings section, key) of its dev-only env fallback.
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
    """A ``DOCQUERY_*`` variable, or a key of a section's JSON value (``key``), that names no setting."""

    name: str
    suggestion: str | None  # the closest real variable (or key, when ``key`` is set), when one is close
    key: str | None = None  # dotted path of the unknown key inside the variable's JSON object

    def message(self, *, refused: bool = False) -> str:
        outcome = "refused in the prod profile" if refused else "ignored"
        if self.key is None:
            hint = f"; did you mean {self.suggestion}?" if self.suggestion else ""
            return f"{self.name} is not a DocQuery setting and is {outcome}{hint}"
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        return f"{self.name}: unknown key {self.key!r} names no setting and is {outcome}{hint}"


def _spellings(var: str) -> str:
    """Compare names without case or separators, so ``DATADIR`` meets ``DATA_DIR``."""
    return re.sub(r"[^A-Z0-9]", "", var.upper())


def _suggest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate (upper-case full variable names) ``name`` most likely meant, if one is close."""
    pool = set(candidates)
    by_spelling = {_spellings(c): c for c in pool}
    if (same := by_spelling.get(_spellings(name))) is not None:
        return same
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
    return close[0] if close else None


def _children(known: frozenset[str], container: str) -> dict[str, str]:
    """Fields of a section (or any nested model) ``container``: upper-case key -> full variable name."""
    prefix = container + NESTED_DELIMITER
    return {k[len(prefix) :]: k for k in known if k.startswith(prefix) and NESTED_DELIMITER not in k[len(prefix) :]}


def _json_object(value: str) -> dict[str, Any] | None:
    if not value.strip().startswith("{"):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None  # pydantic-settings reports malformed JSON itself
    return parsed if isinstance(parsed, dict) else None


def _unknown_keys(
    var: str, container: str, obj: Mapping[str, Any], path: tuple[str, ...], known: frozenset[str]
) -> Iterator[UnknownVariable]:
    """Keys of ``obj`` (the JSON value of ``container``) that name no field, at any depth of nested models."""
    children = _children(known, container)
    for raw_key, inner in obj.items():
        key = str(raw_key)
        if _norm(key) in _SECRET_KEYS:
            continue  # a credential: the secret source refuses or reads it (docquery.secrets)
        full = f"{container}{NESTED_DELIMITER}{key.upper()}"
        if key.upper() in children:
            if isinstance(inner, dict) and _children(known, full):
                yield from _unknown_keys(var, full, inner, (*path, key), known)
            continue
        meant = _suggest(full, children.values())
        suggestion = None if meant is None else ".".join((*path, meant[len(container) + 2 :].lower()))
        yield UnknownVariable(var, suggestion, key=".".join((*path, key)))


def unknown_env_vars(known: Iterable[str], environ: Mapping[str, str]) -> list[UnknownVariable]:
    """Every ``DOCQUERY_*`` variable not in ``known`` (upper-case names), and every key of a section's JSON
    value that names no field of it (nested models too), each with a suggestion.

    Variables and keys that carry a secret are left out: they are the secret source's to judge.
    """
    known_set = frozenset(known)
    out: list[UnknownVariable] = []
    for var in sorted(environ):
        upper, value = var.upper(), environ[var]
        if not upper.startswith(ENV_PREFIX) or upper.startswith(SECRET_ENV_PREFIX):
            continue
        if upper in known_set:
            if _children(known_set, upper) and (obj := _json_object(value)) is not None:
                out.extend(_unknown_keys(var, upper, obj, (), known_set))
        elif not carries_secret(var, value):
            out.append(UnknownVariable(var, _suggest(upper, known_set)))
    return out
