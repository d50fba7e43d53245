"""The one entry point: :func:`build_secret_source` picks the source from settings and checks it.

Vault when ``vault.url`` is set, else the secret files; in dev, the documented env vars as
a fallback. Prod refuses secret env vars and a missing or placeholder required secret here,
where the source exists, so the check reads the secret the way the client will.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from docquery.config.envvars import fallback_env_var
from docquery.config.settings import Profile
from docquery.secrets.base import MissingSecretError, SecretsDirError, SecretSource
from docquery.secrets.env import EnvSecretSource, FallbackSecretSource, refuse_env_secrets
from docquery.secrets.files import FileSecretSource, directory_problem

if TYPE_CHECKING:
    from docquery.config.settings import Settings

LLM_API_KEY = "llm-api-key"
QDRANT_API_KEY = "qdrant-api-key"
EMBEDDER_API_KEY = "embedder-api-key"

# Values that mean "somebody forgot to set this"; refused in prod.
_PLACEHOLDERS = frozenset({"", "changeme", "change-me", "placeholder", "secret", "xxx", "todo", "dummy"})


def required_secrets(settings: Settings) -> list[str]:
    """The secrets the configured clients need: a remote LLM, a Qdrant server, a remote embedder."""
    needed = []
    if settings.llm.base_url:
        needed.append(LLM_API_KEY)
    if settings.qdrant.url:
        needed.append(QDRANT_API_KEY)
    if settings.embedder.kind == "openai":
        needed.append(EMBEDDER_API_KEY)
    return needed


def secret_origin(settings: Settings, name: str, environ: Mapping[str, str] | None = None) -> str:
    """Where ``name`` is read from under these settings (a path or variable, never the value)."""
    if settings.vault.url:
        from docquery.secrets.vault import kv_location

        return f"vault {kv_location(settings, name)}"
    path = settings.secrets_dir / name
    if path.is_file() or settings.profile == Profile.PROD:
        return f"secret file {path}"
    var = fallback_env_var(os.environ if environ is None else environ, name)
    return f"env var {var} (dev only)" if var else f"secret file {path} (absent)"


def _require(source: SecretSource, settings: Settings) -> None:
    for name in required_secrets(settings):
        value = source.get_text(name)
        if value is None or value.get_secret_value().strip().lower() in _PLACEHOLDERS:
            raise MissingSecretError(name, secret_origin(settings, name))


def check_secrets_dir(settings: Settings) -> None:
    """Prod with secret files: refuse a secrets dir that cannot serve them, before any read blames a file."""
    if settings.vault.url or settings.profile != Profile.PROD:
        return  # dev: a missing dir is normal (the default /vault/secrets), and the env fallback applies
    directory = settings.secrets_dir.absolute()
    problem = directory_problem(directory)
    if problem is not None:
        raise SecretsDirError(directory, problem)


def build_secret_source(settings: Settings, *, environ: Mapping[str, str] | None = None) -> SecretSource:
    """The secret source for these settings; prod refuses to start without its required secrets.

    Prod refuses secret env vars up front (naming the variable) even though it
    would never read them: a key left in the pod spec is itself the leak. It also refuses
    a secrets dir that is missing, not a directory or unreadable, naming the dir.
    """
    refuse_env_secrets(settings.profile, environ)
    primary: SecretSource
    if settings.vault.url:
        from docquery.secrets.vault import VaultSecretSource  # hvac only when Vault is configured

        primary = VaultSecretSource.from_settings(settings)
    else:
        check_secrets_dir(settings)
        primary = FileSecretSource(settings.secrets_dir)
    if settings.profile == Profile.PROD:
        _require(primary, settings)
        return primary
    return FallbackSecretSource(primary, EnvSecretSource(profile=settings.profile, environ=environ))
