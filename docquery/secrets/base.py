"""The secret source interface, its errors, and the key provider handed to clients.

Exceptions::

    SecretsError (DocQueryError)
     +-- SecretUnavailableError   a source could not be read (I/O, Vault down)
     |    +-- VaultError            (docquery.secrets.vault) login, renewal or read failed
     |    +-- SecretsDirError       the secrets dir is missing, not a directory or unreadable
     +-- SecretFormatError        content present but not what was expected
     +-- EnvSecretRefusedError    a secret env var in the prod profile
     +-- MissingSecretError       prod needs a secret that is missing or a placeholder

Messages name the secret (file name, variable, Vault path), never its value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import SecretStr

from docquery.core.errors import DocQueryError
from docquery.core.ports import KeyProvider

Clock = Callable[[], float]

# A secret name is a plain file name: no separators, no "..", so a name can
# never make a source read outside its directory or Vault path.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class SecretsError(DocQueryError):
    """Base of every error raised by a secret source."""


class SecretUnavailableError(SecretsError):
    """The source could not be read (permissions, I/O, Vault unreachable or denied)."""


class SecretsDirError(SecretUnavailableError):
    """The secrets dir cannot serve files: missing, not a directory, or not readable and searchable."""

    def __init__(self, directory: Path, problem: str) -> None:
        super().__init__(
            f"the secrets dir {directory} (DOCQUERY_SECRETS_DIR) {problem}: point DOCQUERY_SECRETS_DIR at the "
            "directory the Vault Agent renders secrets into, readable by this process, or set DOCQUERY_VAULT__URL"
        )
        self.directory = directory


class SecretFormatError(SecretsError):
    """The secret exists but its content is malformed (e.g. not JSON)."""


class EnvSecretRefusedError(SecretsError):
    """A secret was provided through an environment variable in the prod profile."""

    def __init__(self, variable: str) -> None:
        super().__init__(
            f"{variable} carries a secret, but the prod profile refuses secrets from environment "
            f"variables; deliver it as a file in the secrets dir (Vault Agent) or from Vault"
        )
        self.variable = variable


class MissingSecretError(SecretsError):
    """The prod profile needs a secret that is missing, empty or a placeholder."""

    def __init__(self, name: str, where: str) -> None:
        super().__init__(
            f"the prod profile needs the secret {name!r}, read from {where}: missing, empty or a placeholder"
        )
        self.name = name


def check_secret_name(name: str) -> str:
    if not _NAME_RE.match(name) or ".." in name:
        raise ValueError(f"invalid secret name {name!r}")
    return name


@runtime_checkable
class SecretSource(Protocol):
    """Where secrets come from. Calls are cheap and thread-safe; call them per use.

    ``version`` changes whenever the value changes, so callers can cache what
    they derive from a secret (a parsed key table) per version.
    """

    def get_text(self, name: str) -> SecretStr | None: ...

    def get_json(self, name: str) -> Any | None: ...

    def version(self, name: str) -> int | None: ...


def secret_getter(source: SecretSource, name: str) -> KeyProvider:
    """A zero-argument reader for clients that take a key provider (LLM, embedder, Qdrant).

    It reads through the source on every call, so a rotated file is used by
    the next request without a restart.
    """
    check_secret_name(name)

    def read() -> SecretStr | None:
        return source.get_text(name)

    return read
