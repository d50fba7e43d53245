"""Vault (or OpenBao) through hvac: login, token renewal, re-login, KV v2 reads.

:class:`VaultSession` owns one hvac client and its token. Before each use it
renews the token when less than ``renew_fraction`` of its TTL is left, and logs
in again when the renewal fails, when the token has (or nearly has) expired,
or when the server answers 403 to a token it considered valid a moment ago
(revoked, or a clock that drifted). Login methods:

* ``kubernetes``: the projected service-account token (``vault.jwt_path``);
* ``jwt``: the same file, validated by Vault's JWT auth method (keys/OIDC);
* ``approle``: ``vault.role`` is the role id; the secret id is read from
  ``<secrets_dir>/vault-approle-secret-id``;
* ``token``: a token read from ``<secrets_dir>/vault-token`` (CLI/dev).

Credentials are read from their files at each login, because the kubelet
rotates projected tokens. Logs carry the auth method, role, TTLs and counts;
never a token, JWT or secret value.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import hvac  # type: ignore[import-untyped, unused-ignore]
from hvac import exceptions as hvac_exc
from pydantic import SecretStr

from docquery.secrets.base import (
    Clock,
    SecretFormatError,
    SecretsError,
    SecretUnavailableError,
    check_secret_name,
)

if TYPE_CHECKING:
    from docquery.config.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

# KV secret key differs from the file name the agent renders (docs/contract.md vs policy paths).
KV_ALIASES: dict[str, dict[str, str]] = {"query": {"qdrant-api-key": "qdrant-read-only-key"}}
KV_VALUE_FIELD = "value"


def kv_key(kv_path: str, name: str) -> str:
    """The KV key of secret ``name``: the file name without ``.json``, after :data:`KV_ALIASES`."""
    check_secret_name(name)
    aliases = KV_ALIASES.get(kv_path.strip("/").rsplit("/", 1)[-1], {})
    return aliases.get(name, name.removesuffix(".json"))


def kv_location(settings: Settings, name: str) -> str:
    """``<mount>/<kv_path>/<key>`` of secret ``name``, for messages (no value, no token)."""
    path = (settings.vault.kv_path or "").strip("/")
    return f"{settings.vault.kv_mount}/{path}/{kv_key(path, name)}"


class VaultError(SecretUnavailableError):
    """A Vault operation failed. Carries the operation and status, never response bodies."""

    def __init__(self, operation: str, status: int | None = None) -> None:
        detail = f" (HTTP {status})" if status else ""
        super().__init__(f"vault {operation} failed{detail}")
        self.operation = operation
        self.status = status


def _status(exc: Exception) -> int | None:
    for cls, code in (
        (hvac_exc.InvalidRequest, 400),
        (hvac_exc.Unauthorized, 401),
        (hvac_exc.Forbidden, 403),
        (hvac_exc.InvalidPath, 404),
        (hvac_exc.RateLimitExceeded, 429),
        (hvac_exc.InternalServerError, 500),
        (hvac_exc.VaultDown, 503),
    ):
        if isinstance(exc, cls):
            return code
    return None


def _read_file(path: str, what: str) -> str:
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecretUnavailableError(f"cannot read {what} file {path!r}: {exc.strerror}") from None
    if not value:
        raise SecretUnavailableError(f"{what} file {path!r} is empty")
    return value


@dataclass(frozen=True)
class Login:
    """How to log in. ``method`` is kubernetes | jwt | approle | token."""

    method: str
    role: str | None = None
    mount: str | None = None
    credential_path: str | None = None  # SA token / JWT / AppRole secret id / token file

    def perform(self, client: Any) -> dict[str, Any]:
        """Log in and return the ``auth`` block (client_token, lease_duration, renewable)."""
        mount = self.mount or self.method
        if self.method == "token":
            token = _read_file(self._path(), "vault token")
            client.token = token
            data: dict[str, Any] = client.auth.token.lookup_self()["data"]
            return {"client_token": token, "lease_duration": data.get("ttl", 0), "renewable": data.get("renewable")}
        if self.role is None:
            raise SecretsError(f"vault auth method {self.method!r} needs a role (DOCQUERY_VAULT__ROLE)")
        if self.method == "kubernetes":
            jwt = _read_file(self._path(), "service-account token")
            resp = client.auth.kubernetes.login(role=self.role, jwt=jwt, use_token=False, mount_point=mount)
        elif self.method == "jwt":
            jwt = _read_file(self._path(), "service-account token")
            resp = client.auth.jwt.jwt_login(role=self.role, jwt=jwt, use_token=False, path=mount)
        elif self.method == "approle":
            secret_id = _read_file(self._path(), "approle secret id")
            resp = client.auth.approle.login(role_id=self.role, secret_id=secret_id, use_token=False, mount_point=mount)
        else:
            raise SecretsError(f"unknown vault auth method {self.method!r}")
        auth: dict[str, Any] = resp["auth"]
        return auth

    def _path(self) -> str:
        if not self.credential_path:
            raise SecretsError(f"vault auth method {self.method!r} needs a credential file path")
        return self.credential_path


@dataclass(frozen=True)
class _Lease:
    token: SecretStr
    ttl_s: float
    renewable: bool
    expires_at: float  # on our clock; +inf for a non-expiring (root/dev) token


@dataclass
class SessionStats:
    logins: int = 0
    renewals: int = 0
    renew_failures: int = 0
    relogins_after_denied: int = 0


class VaultSession:
    """An authenticated hvac client that keeps its token alive. Thread-safe.

    ``renew_fraction``: renew when less than this share of the TTL is left.
    ``expiry_margin_s``: treat a token this close to expiry as expired (log in again).
    """

    def __init__(
        self,
        client: Any,
        login: Login,
        *,
        renew_fraction: float = 0.5,
        expiry_margin_s: float = 1.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if not 0.0 < renew_fraction < 1.0:
            raise ValueError("renew_fraction must be in (0, 1)")
        self._client = client
        self._login = login
        self._renew_fraction = renew_fraction
        self._margin = expiry_margin_s
        self._clock = clock
        self._lock = threading.RLock()
        self._lease: _Lease | None = None
        self._login_at = float("-inf")
        self.stats = SessionStats()

    @classmethod
    def from_settings(cls, settings: Settings, *, url: str | None = None) -> VaultSession:
        v = settings.vault
        if not (url or v.url):
            raise SecretsError("DOCQUERY_VAULT__URL is not set")
        client = hvac.Client(url=url or v.url, verify=v.ca_cert or True, timeout=10)
        if v.auth_method == "approle":
            cred = str(Path(settings.secrets_dir) / "vault-approle-secret-id")
        elif v.auth_method == "token":
            cred = str(Path(settings.secrets_dir) / "vault-token")
        else:
            cred = v.jwt_path
        return cls(client, Login(v.auth_method, role=v.role, mount=v.auth_mount, credential_path=cred))

    def call(self, operation: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn(client)`` with a live token; on a 403 log in once more and retry.

        The retry covers tokens revoked or expired server-side before our clock
        says so. A second 403 is a real policy denial and is raised.
        """
        client = self.client()
        try:
            return fn(client)
        except hvac_exc.Forbidden:
            with self._lock:
                # A fresh token that is denied is a policy denial, not an expiry:
                # don't turn a misconfigured policy into a login per request.
                if self._clock() - self._login_at < self._margin:
                    raise VaultError(operation, 403) from None
                self._do_login()
                self.stats.relogins_after_denied += 1
        except (hvac_exc.VaultError, OSError) as exc:  # requests' errors are OSErrors
            raise VaultError(operation, _status(exc)) from None
        try:
            return fn(self._client)
        except (hvac_exc.VaultError, OSError) as exc:
            raise VaultError(operation, _status(exc)) from None

    def client(self) -> Any:
        """The hvac client with a token that is valid now (renewed or re-logged in)."""
        with self._lock:
            self._ensure_token()
            return self._client

    def _ensure_token(self) -> None:
        lease = self._lease
        now = self._clock()
        if lease is None or now >= lease.expires_at - self._margin:
            self._do_login()
            return
        remaining = lease.expires_at - now
        if lease.renewable and remaining < self._renew_fraction * lease.ttl_s:
            self._renew(lease, now)

    def _renew(self, lease: _Lease, now: float) -> None:
        try:
            auth = self._client.auth.token.renew_self()["auth"]
        except (hvac_exc.VaultError, OSError) as exc:
            self.stats.renew_failures += 1
            log.warning("vault token renewal failed (status %s); logging in again", _status(exc))
            self._do_login()
            return
        ttl = float(auth.get("lease_duration") or 0)
        if ttl <= self._margin or ttl < self._renew_fraction * lease.ttl_s:
            # Capped by max_ttl: renewing again would not help, a fresh login will.
            log.info("vault token near its max TTL (%.0fs left); logging in again", ttl)
            self._do_login()
            return
        self.stats.renewals += 1
        self._lease = _Lease(lease.token, ttl, bool(auth.get("renewable")), now + ttl)
        log.debug("vault token renewed, ttl %.0fs", ttl)

    def _do_login(self) -> None:
        try:
            auth = self._login.perform(self._client)
        except (hvac_exc.VaultError, OSError) as exc:
            raise VaultError(f"login ({self._login.method})", _status(exc)) from None
        token = str(auth["client_token"])
        ttl = float(auth.get("lease_duration") or 0)
        now = self._clock()
        expires = now + ttl if ttl > 0 else float("inf")
        self._client.token = token
        self._lease = _Lease(SecretStr(token), ttl, bool(auth.get("renewable")), expires)
        self._login_at = now
        self.stats.logins += 1
        log.info("vault login via %s role=%s ttl=%.0fs", self._login.method, self._login.role, ttl)


@dataclass(frozen=True)
class _KvEntry:
    value: Any  # the KV "value" field, or the whole data dict when it has none
    version: int
    fetched_at: float
    parsed: Any = None
    has_parsed: bool = False


class VaultSecretSource:
    """KV v2 secrets under ``<kv_mount>/data/<kv_path>/<name>``, cached for ``refresh_s``.

    The KV key is the file name without ``.json`` (``api-keys.json`` ->
    ``api-keys``), after :data:`KV_ALIASES`. A secret holds one field,
    ``value`` (a string, or JSON for ``.json`` names); the agent templates
    render that same field into the files, so both sources agree.
    """

    def __init__(
        self,
        session: VaultSession,
        *,
        kv_path: str,
        kv_mount: str = "secret",
        refresh_s: float = 30.0,
        aliases: dict[str, str] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._session = session
        self._path = kv_path.strip("/")
        self._mount = kv_mount
        self._refresh = refresh_s
        self._aliases = aliases if aliases is not None else KV_ALIASES.get(self._path.rsplit("/", 1)[-1], {})
        self._clock = clock
        self._lock = threading.Lock()
        # One fetch at a time: when the cache expires under load, one thread asks
        # Vault and the others wait for its answer instead of all asking at once.
        self._fetch_lock = threading.Lock()
        self._cache: dict[str, _KvEntry | None] = {}
        self._fetched: dict[str, float] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> VaultSecretSource:
        if not settings.vault.kv_path:
            raise SecretsError("DOCQUERY_VAULT__KV_PATH must be set when DOCQUERY_VAULT__URL is")
        return cls(
            VaultSession.from_settings(settings), kv_path=settings.vault.kv_path, kv_mount=settings.vault.kv_mount
        )

    def kv_key(self, name: str) -> str:
        check_secret_name(name)
        return self._aliases.get(name, name.removesuffix(".json"))

    def get_text(self, name: str) -> SecretStr | None:
        entry = self._entry(name)
        if entry is None:
            return None
        if not isinstance(entry.value, str):
            raise SecretFormatError(f"vault secret {self.kv_key(name)!r} has no string field {KV_VALUE_FIELD!r}")
        return SecretStr(entry.value.strip()) if entry.value.strip() else None

    def get_json(self, name: str) -> Any | None:
        entry = self._entry(name)
        if entry is None:
            return None
        if entry.has_parsed:
            return entry.parsed
        value = entry.value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise SecretFormatError(f"vault secret {self.kv_key(name)!r} is not valid JSON") from None
        with self._lock:
            if self._cache.get(name) is entry:
                self._cache[name] = _KvEntry(entry.value, entry.version, entry.fetched_at, value, True)
        return value

    def version(self, name: str) -> int | None:
        entry = self._entry(name)
        return None if entry is None else entry.version

    def _entry(self, name: str) -> _KvEntry | None:
        key = self.kv_key(name)
        now = self._clock()
        with self._lock:
            if name in self._fetched and now - self._fetched[name] < self._refresh:
                return self._cache[name]
        with self._fetch_lock:
            with self._lock:
                if name in self._fetched and now - self._fetched[name] < self._refresh:
                    return self._cache[name]
            entry = self._fetch(key, now)
            with self._lock:
                old = self._cache.get(name)
                if old is not None and entry is not None and old.version == entry.version:
                    entry = old  # keep the parse cache of an unchanged version
                self._cache[name] = entry
                self._fetched[name] = now
            return entry

    def _fetch(self, key: str, now: float) -> _KvEntry | None:
        path = f"{self._path}/{key}"

        def read(client: Any) -> Any:
            try:
                return client.secrets.kv.v2.read_secret_version(
                    path=path, mount_point=self._mount, raise_on_deleted_version=True
                )
            except hvac_exc.InvalidPath:
                return None  # absent (or deleted): the feature is off, like a missing file

        resp = self._session.call(f"kv read {self._mount}/{path}", read)
        if resp is None:
            return None
        data = resp["data"]
        fields = data.get("data") or {}
        value = fields.get(KV_VALUE_FIELD, fields)
        return _KvEntry(value, int(data["metadata"]["version"]), now)
