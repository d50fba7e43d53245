"""Envelope encryption of chunk text at rest: AES-256-GCM under Vault Transit data keys.

Why: a Qdrant snapshot, volume or backup alone must not leak the documents.
The chunk text in the payload is ``dqenc:v1:<key_id>:<b64url(nonce | ciphertext+tag)>``.

* A data key is a random AES-256 key that Vault Transit generates and wraps
  (``transit/datakey/plaintext/<key>``). Only the wrapped form (``vault:vN:...``)
  is stored, in the collection's ``meta`` point under ``wrapped_keys``:
  ``{"<key_id>": "vault:vN:..."}``. ``key_id`` is ``v<N>-<12 hex>``, so the
  Transit key version that wrapped it is visible without unwrapping.
* Ingest generates a data key, persists the wrapped key through ``on_new_key``
  *before* the first chunk encrypted with it is returned (a crash can never
  leave chunks whose key is not stored), and uses it for at most
  ``key_cache_s``. Ingest cannot unwrap (its policy has no ``transit/decrypt``),
  so after that it generates a fresh one: new chunks always use the newest
  Transit key version, which is how rotation reaches new data.
* Query unwraps a key through ``transit/decrypt/<key>`` on first use and keeps
  the plaintext key in memory for at most ``key_cache_s`` (and at most
  ``max_cached_keys`` keys), then unwraps again. Old chunks stay readable after
  a Transit rotation because Transit keeps the older key versions for decrypt.
* The AES-GCM associated data binds the key id and a caller-chosen context
  (the point id), so a ciphertext copied onto another point, e.g. one with a
  wider ACL, fails authentication instead of decrypting.

Errors (``CryptoError`` tree) never carry plaintext, ciphertext or keys::

    CryptoError (RuntimeError)
     +-- DecryptionError       malformed token, unknown key id, failed authentication
     +-- KeyUnavailableError   Transit could not generate or unwrap a data key
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from docquery.core.errors import DocQueryError
from docquery.secrets import Clock, SecretsError

if TYPE_CHECKING:
    from docquery.config.settings import Settings
    from docquery.secrets.vault import VaultSession

log = logging.getLogger(__name__)

# Token format markers, not credentials.
TOKEN_PREFIX = "dqenc"  # noqa: S105
TOKEN_VERSION = "v1"  # noqa: S105
# Meta point payload: one top-level field per data key, "wrapped_key:<key_id>" -> "vault:vN:...".
# Flat fields because the meta point is updated with set_payload, which merges top-level
# keys: concurrent ingest shards each add their own key and can never overwrite another's
# (a lost wrapped key would make its chunks unreadable forever).
WRAPPED_KEY_FIELD_PREFIX = "wrapped_key:"
# Also accepted when reading: one object field {key_id: wrapped}.
WRAPPED_KEYS_FIELD = "wrapped_keys"

_NONCE_BYTES = 12
_KEY_ID_RE = re.compile(r"^v(\d{1,9})-[0-9a-f]{12}$")
_WRAPPED_RE = re.compile(r"^vault:v(\d{1,9}):[A-Za-z0-9+/=]+$")


class CryptoError(DocQueryError):
    """Base of encryption-at-rest errors."""


class DecryptionError(CryptoError):
    """A stored ciphertext could not be decrypted (malformed, unknown key, tampered)."""


class KeyUnavailableError(CryptoError):
    """Transit could not generate or unwrap a data key (down, denied, unknown key)."""


@dataclass(frozen=True)
class WrappedKey:
    """A data key as stored with the collection: only its Transit-wrapped form."""

    key_id: str
    wrapped: str

    @property
    def transit_version(self) -> int:
        return _wrapped_version(self.wrapped)


def _wrapped_version(wrapped: str) -> int:
    m = _WRAPPED_RE.match(wrapped)
    if not m:
        raise CryptoError("wrapped data key is not a Transit ciphertext (vault:vN:...)")
    return int(m.group(1))


def parse_key_map(value: Any) -> dict[str, str]:
    """Validate the ``wrapped_keys`` payload of the meta point: ``{key_id: "vault:vN:..."}``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise CryptoError(f"{WRAPPED_KEYS_FIELD} must be an object of key id -> wrapped key")
    out: dict[str, str] = {}
    for key_id, wrapped in value.items():
        if not isinstance(key_id, str) or not _KEY_ID_RE.match(key_id) or not isinstance(wrapped, str):
            raise CryptoError(f"{WRAPPED_KEYS_FIELD} has a malformed entry")
        if _wrapped_version(wrapped) != int(key_id[1:].split("-", 1)[0]):
            raise CryptoError(f"{WRAPPED_KEYS_FIELD} entry {key_id} does not match its key version")
        out[key_id] = wrapped
    return out


def meta_fields_for(record: WrappedKey) -> dict[str, str]:
    """The meta point fields that store ``record`` (merge them with set_payload)."""
    return {f"{WRAPPED_KEY_FIELD_PREFIX}{record.key_id}": record.wrapped}


def key_map_from_meta(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """All wrapped keys stored in a meta point payload, validated."""
    if not meta:
        return {}
    found: dict[str, Any] = dict(meta.get(WRAPPED_KEYS_FIELD) or {})
    for field, value in meta.items():
        if isinstance(field, str) and field.startswith(WRAPPED_KEY_FIELD_PREFIX):
            found[field.removeprefix(WRAPPED_KEY_FIELD_PREFIX)] = value
    return parse_key_map(found)


class DataKeyService(Protocol):
    """Generates and unwraps data keys. :class:`TransitDataKeys` is the real one."""

    def generate(self) -> tuple[bytes, str]:
        """A new data key: (plaintext 32 bytes, wrapped ``vault:vN:...``)."""
        ...

    def unwrap(self, wrapped: str) -> bytes: ...


class TransitDataKeys:
    """Data keys from Vault Transit through a :class:`VaultSession` (renewal, re-login)."""

    def __init__(self, session: VaultSession, *, mount: str = "transit", key: str = "docquery") -> None:
        self._session = session
        self._mount = mount
        self._key = key

    def generate(self) -> tuple[bytes, str]:
        from docquery.secrets.vault import VaultError

        try:
            resp = self._session.call(
                f"transit datakey {self._mount}/{self._key}",
                lambda c: c.secrets.transit.generate_data_key(
                    name=self._key, key_type="plaintext", bits=256, mount_point=self._mount
                ),
            )
            data = resp["data"]
            plaintext = base64.b64decode(data["plaintext"], validate=True)
        except (VaultError, KeyError, TypeError, binascii.Error) as exc:
            raise KeyUnavailableError(f"cannot generate a data key: {_reason(exc)}") from None
        if len(plaintext) != 32:
            raise KeyUnavailableError("transit returned a data key that is not 256 bits")
        return plaintext, str(data["ciphertext"])

    def unwrap(self, wrapped: str) -> bytes:
        from docquery.secrets.vault import VaultError

        try:
            resp = self._session.call(
                f"transit decrypt {self._mount}/{self._key}",
                lambda c: c.secrets.transit.decrypt_data(name=self._key, ciphertext=wrapped, mount_point=self._mount),
            )
            plaintext = base64.b64decode(resp["data"]["plaintext"], validate=True)
        except (VaultError, KeyError, TypeError, binascii.Error) as exc:
            raise KeyUnavailableError(f"cannot unwrap a data key: {_reason(exc)}") from None
        if len(plaintext) != 32:
            raise KeyUnavailableError("unwrapped data key is not 256 bits")
        return plaintext


def _reason(exc: Exception) -> str:
    # SecretsError messages are ours (operation + status); anything else only by type.
    return str(exc) if isinstance(exc, SecretsError) else type(exc).__name__


def new_wrapped_key(keys: DataKeyService) -> tuple[WrappedKey, bytes]:
    """Generate a data key; returns the record to store and the plaintext key to use."""
    plaintext, wrapped = keys.generate()
    key_id = f"v{_wrapped_version(wrapped)}-{secrets.token_hex(6)}"
    return WrappedKey(key_id, wrapped), plaintext


def rotate_transit_key(session: VaultSession, *, mount: str = "transit", key: str = "docquery") -> None:
    """Rotate the Transit key (operator action; no workload policy allows it).

    New data keys are then wrapped by the new version; existing wrapped keys
    still unwrap, because Transit keeps older versions for decryption until an
    operator raises ``min_decryption_version``.
    """
    session.call(f"transit rotate {mount}/{key}", lambda c: c.secrets.transit.rotate_key(name=key, mount_point=mount))


@dataclass
class _CachedKey:
    aead: AESGCM
    expires_at: float


class EnvelopeCipher:
    """``TextCipher`` for chunk text. One instance per process; thread-safe.

    Ingest passes ``on_new_key`` (persist a wrapped key into the meta point);
    query passes ``key_map`` (read ``wrapped_keys`` from the meta point). Either
    side may pass both.
    """

    def __init__(
        self,
        keys: DataKeyService,
        *,
        key_map: Callable[[], Mapping[str, str]] | None = None,
        on_new_key: Callable[[WrappedKey], None] | None = None,
        cache_s: float = 300.0,
        max_cached_keys: int = 64,
        clock: Clock = time.monotonic,
    ) -> None:
        if cache_s <= 0 or max_cached_keys < 1:
            raise ValueError("cache_s must be > 0 and max_cached_keys >= 1")
        self._keys = keys
        self._load_key_map = key_map
        self._on_new_key = on_new_key
        self._cache_s = cache_s
        self._max = max_cached_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _CachedKey] = OrderedDict()
        self._wrapped: dict[str, str] = {}
        self._active: tuple[str, _CachedKey] | None = None
        self.unwraps = 0  # for tests and metrics: how often Transit was asked

    # -- TextCipher -------------------------------------------------------------

    def encrypt(self, plaintext: str, *, aad: str = "") -> str:
        key_id, aead = self._active_key()
        nonce = os.urandom(_NONCE_BYTES)
        ct = aead.encrypt(nonce, plaintext.encode("utf-8"), _aad(key_id, aad))
        body = base64.urlsafe_b64encode(nonce + ct).rstrip(b"=").decode("ascii")
        return f"{TOKEN_PREFIX}:{TOKEN_VERSION}:{key_id}:{body}"

    def decrypt(self, token: str, *, aad: str = "") -> str:
        key_id, blob = _parse_token(token)
        aead = self._key_for(key_id)
        try:
            data = aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _aad(key_id, aad))
        except InvalidTag:
            raise DecryptionError(
                f"chunk ciphertext under key {key_id} failed authentication (tampered or moved)"
            ) from None
        return data.decode("utf-8")

    # -- key management -----------------------------------------------------------

    @staticmethod
    def is_token(value: str) -> bool:
        return value.startswith(f"{TOKEN_PREFIX}:")

    @staticmethod
    def key_id_of(token: str) -> str:
        return _parse_token(token)[0]

    def rotate_data_key(self) -> None:
        """Make the next ``encrypt`` use a fresh data key (e.g. after a Transit rotation)."""
        with self._lock:
            self._active = None

    def forget_keys(self) -> None:
        """Drop every cached plaintext key now (e.g. on shutdown)."""
        with self._lock:
            self._cache.clear()
            self._active = None

    def _active_key(self) -> tuple[str, AESGCM]:
        now = self._clock()
        with self._lock:
            if self._active is not None and now < self._active[1].expires_at:
                return self._active[0], self._active[1].aead
            if self._on_new_key is None:
                raise CryptoError("this cipher cannot encrypt: no on_new_key to store a new data key")
            record, plaintext = new_wrapped_key(self._keys)
            # Persist first: a chunk must never exist without its stored wrapped key.
            self._on_new_key(record)
            cached = _CachedKey(AESGCM(plaintext), now + self._cache_s)
            self._active = (record.key_id, cached)
            self._wrapped[record.key_id] = record.wrapped
            log.info("new data key %s (transit key version %d)", record.key_id, record.transit_version)
            return record.key_id, cached.aead

    def _key_for(self, key_id: str) -> AESGCM:
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key_id)
            if hit is not None and now < hit.expires_at:
                self._cache.move_to_end(key_id)
                return hit.aead
            self._cache.pop(key_id, None)
            active = self._active
            if active is not None and active[0] == key_id and now < active[1].expires_at:
                return active[1].aead
            wrapped = self._wrapped.get(key_id)
        if wrapped is None:
            wrapped = self._reload_map().get(key_id)
            if wrapped is None:
                raise DecryptionError(f"unknown data key {key_id}: not in the collection's {WRAPPED_KEYS_FIELD}")
        aead = AESGCM(self._keys.unwrap(wrapped))
        with self._lock:
            self.unwraps += 1
            self._cache[key_id] = _CachedKey(aead, self._clock() + self._cache_s)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return aead

    def _reload_map(self) -> dict[str, str]:
        if self._load_key_map is None:
            return {}
        fresh = parse_key_map(self._load_key_map())
        with self._lock:
            self._wrapped.update(fresh)
        return fresh


def _aad(key_id: str, context: str) -> bytes:
    return f"{TOKEN_PREFIX}:{TOKEN_VERSION}:{key_id}\x00{context}".encode()


def _parse_token(token: str) -> tuple[str, bytes]:
    parts = token.split(":", 3)
    if len(parts) != 4 or parts[0] != TOKEN_PREFIX:
        raise DecryptionError("not an encrypted chunk token")
    if parts[1] != TOKEN_VERSION:
        raise DecryptionError(f"unsupported token version {parts[1][:8]!r}")
    key_id = parts[2]
    if not _KEY_ID_RE.match(key_id):
        raise DecryptionError("malformed key id in token")
    try:
        blob = base64.urlsafe_b64decode(parts[3] + "=" * (-len(parts[3]) % 4))
    except (binascii.Error, ValueError):
        raise DecryptionError("malformed token body") from None
    if len(blob) < _NONCE_BYTES + 16:
        raise DecryptionError("token body too short")
    return key_id, blob


def build_envelope_cipher(
    settings: Settings,
    *,
    session: VaultSession | None = None,
    key_map: Callable[[], Mapping[str, str]] | None = None,
    on_new_key: Callable[[WrappedKey], None] | None = None,
) -> EnvelopeCipher | None:
    """The cipher when ``encryption.enabled``, else None. Needs a Vault URL."""
    enc = settings.encryption
    if not enc.enabled:
        return None
    if session is None:
        from docquery.secrets.vault import VaultSession

        url = enc.vault_url or settings.vault.url
        if not url:
            raise SecretsError("encryption at rest needs DOCQUERY_ENCRYPTION__VAULT_URL or DOCQUERY_VAULT__URL")
        session = VaultSession.from_settings(settings, url=url)
    keys = TransitDataKeys(session, mount=enc.transit_mount, key=enc.transit_key)
    return EnvelopeCipher(keys, key_map=key_map, on_new_key=on_new_key, cache_s=enc.key_cache_s)
