"""Secrets from ``DOCQUERY_*`` environment variables: the dev-only fallback, and the prod refusal.

Env vars leak through ``/proc/<pid>/environ``, crash dumps and ``kubectl describe``, so the
prod profile refuses every variable that carries a secret, in whatever form, naming it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

from docquery.config.envvars import SECRET_ENV_PREFIX, SECRET_FILES, env_var_for, fallback_env_var, secret_env_vars
from docquery.config.settings import Profile
from docquery.secrets.base import EnvSecretRefusedError, SecretFormatError, SecretSource, check_secret_name

log = logging.getLogger(__name__)


def _is_documented_fallback(var: str) -> bool:
    upper = var.upper()
    return upper.startswith(SECRET_ENV_PREFIX) or upper in {env_var_for(name) for name in SECRET_FILES}


def refuse_env_secrets(profile: Profile | str, environ: Mapping[str, str] | None = None) -> None:
    """Prod: raise naming the first variable that carries a secret. Dev: warn for each."""
    present = secret_env_vars(os.environ if environ is None else environ)
    if not present:
        return
    if Profile(profile) == Profile.PROD:
        raise EnvSecretRefusedError(present[0])
    for var in present:
        if _is_documented_fallback(var):
            log.warning("secret may be taken from environment variable %s (dev profile only)", var)
        else:
            log.warning(
                "%s carries a secret in a form DocQuery does not read; use the secret file, or in dev "
                "the variables named in docs/settings.md (e.g. DOCQUERY_LLM__API_KEY)",
                var,
            )


class EnvSecretSource:
    """Secrets from their documented ``DOCQUERY_*`` variables (any case). Dev profile only.

    Constructing it in the prod profile raises :class:`EnvSecretRefusedError`
    naming the variable that is set (or the convention, when none is).
    """

    def __init__(self, *, profile: Profile | str, environ: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if environ is None else environ
        if Profile(profile) == Profile.PROD:
            present = secret_env_vars(self._env)
            raise EnvSecretRefusedError(present[0] if present else f"{SECRET_ENV_PREFIX}*")
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def _value(self, name: str) -> tuple[str, str] | None:
        var = fallback_env_var(self._env, check_secret_name(name))
        value = None if var is None else self._env.get(var)
        if var is None or value is None or not value.strip():
            return None
        with self._lock:
            if var not in self._warned:
                self._warned.add(var)
                log.warning("secret %s taken from environment variable %s (dev profile only)", name, var)
        return var, value.strip()

    def get_text(self, name: str) -> SecretStr | None:
        found = self._value(name)
        return None if found is None else SecretStr(found[1])

    def get_json(self, name: str) -> Any | None:
        found = self._value(name)
        if found is None:
            return None
        try:
            return json.loads(found[1])
        except ValueError:
            raise SecretFormatError(f"{found[0]} is not valid JSON") from None

    def version(self, name: str) -> int | None:
        # Env vars cannot change in a running process: one version.
        return None if self._value(name) is None else 1


class FallbackSecretSource:
    """Asks ``primary`` first and ``fallback`` only when the primary has nothing (dev)."""

    def __init__(self, primary: SecretSource, fallback: SecretSource) -> None:
        self._primary = primary
        self._fallback = fallback

    def _pick(self, name: str) -> SecretSource:
        return self._primary if self._primary.version(name) is not None else self._fallback

    def get_text(self, name: str) -> SecretStr | None:
        return self._pick(name).get_text(name)

    def get_json(self, name: str) -> Any | None:
        return self._pick(name).get_json(name)

    def version(self, name: str) -> int | None:
        v = self._primary.version(name)
        if v is not None:
            return v
        fv = self._fallback.version(name)
        # Negative so a switch between sources always changes the version.
        return None if fv is None else -fv
