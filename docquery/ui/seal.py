"""Sealed cookies: AES-256-GCM under keys from the secret source, with rotation.

A sealed value is ``base64url(kid[8] | nonce[12] | ciphertext+tag)``. ``kid`` is the first 8 bytes
of SHA-256 over the key, so opening picks the key without trying each. The purpose (``session``,
``oidc``) is the associated data: a value sealed for one purpose does not open as another. The
payload is JSON holding its own expiry, checked on opening, so a cookie's ``Max-Age`` is only a
hint to the browser.

Keys: the secret ``ui.session_keys_file``, one base64url 32-byte key per line; the first seals, all
open, so a new key goes first and the old one is dropped once its cookies have expired. Every
replica reads the same secret, so any of them opens what another sealed. Without the secret, dev
makes a key at start (sessions end at restart) and prod seals nothing (sign-in is refused).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from docquery.core.errors import ConfigError
from docquery.secrets import SecretsError, SecretSource

log = logging.getLogger(__name__)

KEY_BYTES = 32
_KID = 8
_NONCE = 12
MAX_SEALED_CHARS = 3800  # a browser keeps a cookie of about 4 KB


class SealError(ConfigError):
    """No key can seal: the message says what to set, never a value."""


class Sealer:
    def __init__(self, source: SecretSource, secret_name: str, *, dev_fallback: bool, clock: Callable[[], float]):
        self._source = source
        self._name = secret_name
        self._clock = clock
        self._lock = threading.Lock()
        self._version: int | object | None = object()
        self._keys: list[tuple[bytes, AESGCM]] = []
        self._fallback = [_keyed(AESGCM.generate_key(bit_length=256))] if dev_fallback else []

    def now(self) -> float:
        return self._clock()

    def seal(self, purpose: str, payload: Mapping[str, Any], ttl_s: float) -> str:
        keys = self._current()
        if not keys:
            raise SealError(f"the page's cookie keys are not configured: put {self._name} in the secret source")
        kid, aead = keys[0]
        nonce = os.urandom(_NONCE)
        body = json.dumps({**payload, "exp": self._clock() + ttl_s}, separators=(",", ":")).encode()
        sealed = kid + nonce + aead.encrypt(nonce, body, purpose.encode())
        return base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def open(self, purpose: str, token: str | None) -> dict[str, Any] | None:
        """The payload, or None for anything not sealed by one of our keys for ``purpose``, or expired."""
        payload = self._decrypt(purpose, token) if token and len(token) <= MAX_SEALED_CHARS else None
        if not isinstance(payload, dict):
            return None
        exp = payload.get("exp")
        if not isinstance(exp, int | float) or exp <= self._clock():
            return None
        return {str(k): v for k, v in payload.items()}

    def _decrypt(self, purpose: str, token: str) -> Any:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            return None
        kid, nonce, ciphertext = raw[:_KID], raw[_KID : _KID + _NONCE], raw[_KID + _NONCE :]
        aead = next((a for k, a in self._current() if k == kid), None)
        if aead is None or len(nonce) != _NONCE:
            return None
        try:
            return json.loads(aead.decrypt(nonce, ciphertext, purpose.encode()))
        except (InvalidTag, ValueError):
            return None

    def _current(self) -> list[tuple[bytes, AESGCM]]:
        try:
            version = self._source.version(self._name)
        except SecretsError as exc:
            log.error("cookie key file %s unavailable (%s); no page session opens", self._name, type(exc).__name__)
            return []
        if version != self._version:
            with self._lock:
                if version != self._version:
                    self._keys = self._load(version)
                    self._version = version
        return self._keys or self._fallback

    def _load(self, version: int | None) -> list[tuple[bytes, AESGCM]]:
        if version is None:
            if self._fallback:
                log.warning("no %s secret: page sessions use a key made at start (dev only)", self._name)
            return []
        try:
            text = self._source.get_text(self._name)
            keys = parse_keys(text.get_secret_value() if text is not None else "")
        except (SecretsError, ValueError) as exc:
            log.error("cookie key file %s rejected (%s); no page session opens", self._name, exc)
            return []
        log.info("cookie key file %s loaded: %d keys", self._name, len(keys))
        return keys


def parse_keys(text: str) -> list[tuple[bytes, AESGCM]]:
    """One base64url key per line (blank lines and ``#`` comments ignored); each must be 32 bytes."""
    keys = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key = base64.urlsafe_b64decode(line + "=" * (-len(line) % 4))
        except (binascii.Error, ValueError):
            raise ValueError(f"line {n} is not base64url") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"line {n} is not a {KEY_BYTES}-byte key")
        keys.append(_keyed(key))
    if not keys:
        raise ValueError("it holds no key")
    return keys


def new_key() -> str:
    """A fresh key, as a line of the key file."""
    return base64.urlsafe_b64encode(AESGCM.generate_key(bit_length=256)).decode().rstrip("=")


def _keyed(key: bytes) -> tuple[bytes, AESGCM]:
    return hashlib.sha256(key).digest()[:_KID], AESGCM(key)
