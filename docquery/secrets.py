"""Secret sources: Vault-injected files (default), Vault via hvac, env vars (dev only).

Every credential the service uses is read through one small interface,
:class:`SecretSource`, so the code that needs a secret never knows where it
came from and re-reads it cheaply on every use (which is what makes rotation
work without a restart).

Sources:

* :class:`FileSecretSource`: files under ``DOCQUERY_SECRETS_DIR`` as the Vault
  Agent Injector renders them (``/vault/secrets/<name>``, an in-memory volume).
* :class:`docquery.vault.VaultSecretSource`: KV v2 reads through hvac, for the
  CLI and for clusters without the injector.
* :class:`EnvSecretSource`: ``DOCQUERY_*`` environment variables, dev profile
  only. Env vars leak through ``/proc/<pid>/environ``, crash dumps and
  ``kubectl describe``, so the prod profile refuses them, naming the variable.

Exceptions::

    SecretsError (RuntimeError)
     +-- SecretUnavailableError   a source could not be read (I/O, Vault down)
     +-- SecretFormatError        content present but not what was expected
     +-- EnvSecretRefusedError    a secret env var in the prod profile

Messages name the secret (file name, variable, Vault path), never its value.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import SecretStr

from docquery.errors import DocQueryError
from docquery.settings import ENV_PREFIX, SECRET_FILES, Profile, contract_secret_env_var

if TYPE_CHECKING:
    from docquery.settings import Settings

log = logging.getLogger(__name__)

Clock = Callable[[], float]

# A secret name is a plain file name: no separators, no "..", so a name can
# never make a source read outside its directory or Vault path.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MISSING = object()


class SecretsError(DocQueryError):
    """Base of every error raised by a secret source."""


class SecretUnavailableError(SecretsError):
    """The source could not be read (permissions, I/O, Vault unreachable or denied)."""


class SecretFormatError(SecretsError):
    """The secret exists but its content is malformed (e.g. not JSON)."""


class EnvSecretRefusedError(SecretsError):
    """A secret was provided through an environment variable in the prod profile."""

    def __init__(self, variable: str) -> None:
        super().__init__(
            f"{variable} is set, but the prod profile refuses secrets from environment "
            f"variables; deliver it as a file in the secrets dir (Vault Agent) or from Vault"
        )
        self.variable = variable


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


@dataclasses.dataclass(frozen=True)
class _FileVersion:
    """One observed version of a file. Immutable, so a reader keeps a consistent value."""

    stat_key: tuple[int, int, int, int] | None  # None: file absent
    content: bytes | None
    generation: int
    read_at: float
    checked_at: float
    parsed: Any = _MISSING  # JSON parse cache for this version (set once, under the lock)


class FileSecretSource:
    """Secret files as the Vault Agent renders them, re-read when they change.

    A stat (inode, mtime, size, ctime) is taken at most every ``check_interval_s``
    per file; the file is re-read when the stat changes, and also every
    ``full_reread_s`` in case a same-size write landed within the filesystem's
    mtime granularity. The Agent writes by rename and Kubernetes secret volumes
    swap a symlink, both of which change the inode.

    In-flight requests keep the value object they already read; the next call
    after a change returns the new value.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        check_interval_s: float = 0.25,
        full_reread_s: float = 5.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self._dir = Path(directory)
        self._interval = check_interval_s
        self._full_reread = full_reread_s
        self._clock = clock
        self._lock = threading.Lock()
        self._files: dict[str, _FileVersion] = {}

    @property
    def directory(self) -> Path:
        return self._dir

    def get_text(self, name: str) -> SecretStr | None:
        content = self._current(name).content
        if content is None:
            return None
        try:
            text = content.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SecretFormatError(f"secret file {name!r} is not UTF-8") from None
        return SecretStr(text) if text else None

    def get_json(self, name: str) -> Any | None:
        current = self._current(name)
        if current.content is None:
            return None
        if current.parsed is _MISSING:
            try:
                parsed = json.loads(current.content)
            except (ValueError, UnicodeDecodeError):
                # "from None": JSONDecodeError keeps the whole document in .doc.
                raise SecretFormatError(f"secret file {name!r} is not valid JSON") from None
            with self._lock:
                latest = self._files.get(name)
                if latest is not None and latest.generation == current.generation:
                    self._files[name] = dataclasses.replace(latest, parsed=parsed)
            return parsed
        return current.parsed

    def version(self, name: str) -> int | None:
        current = self._current(name)
        return None if current.content is None else current.generation

    # -- internals -------------------------------------------------------------

    def _current(self, name: str) -> _FileVersion:
        check_secret_name(name)
        now = self._clock()
        cached = self._files.get(name)  # dict.get is atomic: the fast path takes no lock
        if cached is not None and now - cached.checked_at < self._interval:
            return cached
        with self._lock:
            cached = self._files.get(name)
            if cached is not None and now - cached.checked_at < self._interval:
                return cached
            fresh = self._refresh(name, cached, now)
            self._files[name] = fresh
            return fresh

    def _refresh(self, name: str, cached: _FileVersion | None, now: float) -> _FileVersion:
        path = self._dir / name
        try:
            st = path.stat()
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise SecretUnavailableError(f"cannot stat secret file {name!r}: {exc.strerror}") from None
        stat_key = None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)
        unchanged = cached is not None and stat_key == cached.stat_key
        if unchanged and cached is not None and (stat_key is None or now - cached.read_at < self._full_reread):
            return dataclasses.replace(cached, checked_at=now)
        content = None if st is None else self._read(path, name)
        if cached is not None and content == cached.content:
            return dataclasses.replace(cached, stat_key=stat_key, read_at=now, checked_at=now)
        generation = 1 if cached is None else cached.generation + 1
        if cached is not None:
            # Names and generations only: the values never reach a log line.
            log.info("secret file %s changed (generation %d)", name, generation)
        return _FileVersion(stat_key, content, generation, read_at=now, checked_at=now)

    @staticmethod
    def _read(path: Path, name: str) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None  # removed between stat and read
        except OSError as exc:
            raise SecretUnavailableError(f"cannot read secret file {name!r}: {exc.strerror}") from None


def env_var_for(name: str) -> str:
    """The env var a dev-profile secret may come from.

    Contract names map to their settings variable (``llm-api-key`` ->
    ``DOCQUERY_LLM__API_KEY``); any other secret ``x-y.json`` -> ``DOCQUERY_SECRET__X_Y``.
    """
    if name in SECRET_FILES:
        return contract_secret_env_var(name)
    stem = name.removesuffix(".json")
    return f"{ENV_PREFIX}SECRET__" + re.sub(r"[^A-Za-z0-9]", "_", stem).upper()


def secret_env_vars(environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the set env vars that carry secrets (contract vars and ``DOCQUERY_SECRET__*``)."""
    env = os.environ if environ is None else environ
    contract = {env_var_for(name) for name in SECRET_FILES}
    prefix = f"{ENV_PREFIX}SECRET__"
    return sorted(v for v in env if v.upper() in contract or v.upper().startswith(prefix))


def refuse_env_secrets(profile: Profile | str, environ: Mapping[str, str] | None = None) -> None:
    """Prod: raise naming the first secret env var that is set. Dev: warn for each."""
    present = secret_env_vars(environ)
    if not present:
        return
    if Profile(profile) == Profile.PROD:
        raise EnvSecretRefusedError(present[0])
    for var in present:
        log.warning("secret may be taken from environment variable %s (dev profile only)", var)


class EnvSecretSource:
    """Secrets from ``DOCQUERY_*`` environment variables. Dev profile only.

    Constructing it in the prod profile raises :class:`EnvSecretRefusedError`
    naming the variable that is set (or the convention, when none is).
    """

    def __init__(self, *, profile: Profile | str, environ: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if environ is None else environ
        if Profile(profile) == Profile.PROD:
            present = secret_env_vars(self._env)
            raise EnvSecretRefusedError(present[0] if present else f"{ENV_PREFIX}SECRET__*")
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def _value(self, name: str) -> str | None:
        var = env_var_for(check_secret_name(name))
        value = self._env.get(var)
        if value is None or not value.strip():
            return None
        with self._lock:
            if var not in self._warned:
                self._warned.add(var)
                log.warning("secret %s taken from environment variable %s (dev profile only)", name, var)
        return value.strip()

    def get_text(self, name: str) -> SecretStr | None:
        value = self._value(name)
        return None if value is None else SecretStr(value)

    def get_json(self, name: str) -> Any | None:
        value = self._value(name)
        if value is None:
            return None
        try:
            return json.loads(value)
        except ValueError:
            raise SecretFormatError(f"{env_var_for(name)} is not valid JSON") from None

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


def secret_getter(source: SecretSource, name: str) -> Callable[[], SecretStr | None]:
    """A zero-argument reader for clients that take a key provider (the LLM generator).

    It reads through the source on every call, so a rotated file is used by
    the next request without a restart.
    """
    check_secret_name(name)

    def read() -> SecretStr | None:
        return source.get_text(name)

    return read


def build_secret_source(settings: Settings, *, environ: Mapping[str, str] | None = None) -> SecretSource:
    """Pick the source from settings: Vault when ``vault.url`` is set, else the files.

    Prod refuses secret env vars up front (naming the variable) even though it
    would never read them: a key left in the pod spec is itself the leak.
    Dev falls back to env vars, with a warning, when no file/Vault value exists.
    """
    refuse_env_secrets(settings.profile, environ)
    primary: SecretSource
    if settings.vault.url:
        from docquery.vault import VaultSecretSource  # hvac only when Vault is configured

        primary = VaultSecretSource.from_settings(settings)
    else:
        primary = FileSecretSource(settings.secrets_dir)
    if settings.profile == Profile.PROD:
        return primary
    return FallbackSecretSource(primary, EnvSecretSource(profile=settings.profile, environ=environ))
