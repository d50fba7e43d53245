"""Secret sources: Vault-injected files (default), Vault via hvac, env vars (dev only).

Every credential the service uses is read through one small interface,
:class:`SecretSource`, built by one function, :func:`build_secret_source`, so the
code that needs a secret never knows where it came from and re-reads it cheaply on
every use (which is what makes rotation work without a restart). Clients take a
key provider (:func:`secret_getter`), never a value.

* :class:`FileSecretSource` (``files``): files under ``DOCQUERY_SECRETS_DIR`` as the
  Vault Agent Injector renders them.
* :class:`VaultSecretSource` (``vault``): KV v2 reads through hvac, for the CLI and
  clusters without the injector; imported only when Vault is configured.
* :class:`EnvSecretSource` (``env``): documented ``DOCQUERY_*`` variables, dev only.
"""

from docquery.secrets.base import (
    Clock,
    EnvSecretRefusedError,
    MissingSecretError,
    SecretFormatError,
    SecretsDirError,
    SecretsError,
    SecretSource,
    SecretUnavailableError,
    check_secret_name,
    secret_getter,
)
from docquery.secrets.build import (
    EMBEDDER_API_KEY,
    LLM_API_KEY,
    QDRANT_API_KEY,
    build_secret_source,
    check_secrets_dir,
    required_secrets,
    secret_origin,
)
from docquery.secrets.env import EnvSecretSource, FallbackSecretSource, refuse_env_secrets
from docquery.secrets.files import FileSecretSource

__all__ = [
    "EMBEDDER_API_KEY",
    "LLM_API_KEY",
    "QDRANT_API_KEY",
    "Clock",
    "EnvSecretRefusedError",
    "EnvSecretSource",
    "FallbackSecretSource",
    "FileSecretSource",
    "MissingSecretError",
    "SecretFormatError",
    "SecretSource",
    "SecretUnavailableError",
    "SecretsDirError",
    "SecretsError",
    "build_secret_source",
    "check_secret_name",
    "check_secrets_dir",
    "refuse_env_secrets",
    "required_secrets",
    "secret_getter",
    "secret_origin",
]
