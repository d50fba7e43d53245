"""Sealed listing cursors: opaque, authenticated, bound to the caller and the listing, and expiring.

A cursor is AES-256-GCM over ``{position, expiry}``, with the principal id and the listing's name as
associated data: it reveals nothing of the position (a ``doc_id``), cannot be forged or altered, and opens
only for the principal and the listing it was made for. Every failure (garbage, another principal's
cursor, another listing's, expired, a retired key) is the same 422, so none can be told apart.

The key is the secret ``cursor-key`` (any text of at least 32 characters, through the secret source, so a
new value is used without a restart); ``cursor-key-previous``, while present, still opens cursors made
under the key before it, so a rotation breaks no walk in progress. Without ``cursor-key`` a key is drawn
per process: cursors then fail after a restart and across replicas (logged once).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from docquery.secrets import SecretsError, SecretSource

log = logging.getLogger("docquery.api.cursors")

CURRENT, PREVIOUS = "cursor-key", "cursor-key-previous"
MIN_KEY_CHARS = 32
_VERSION = b"\x01"
_NONCE = 12


def _aead(secret: str) -> AESGCM:
    # The secret may be any text: hashed to the cipher's key size, with a label so it derives nothing else.
    return AESGCM(hashlib.sha256(b"docquery listing cursor\x1f" + secret.encode("utf-8")).digest())


class CursorSealer:
    def __init__(self, source: SecretSource, *, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self._source = source
        self._ttl = ttl_s
        self._clock = clock
        self._process_key = _aead(base64.b64encode(os.urandom(32)).decode())
        self._warned = False

    def _key(self, name: str) -> AESGCM | None:
        try:
            secret = self._source.get_text(name)
        except SecretsError as exc:
            log.error("secret %s unavailable (%s)", name, type(exc).__name__)
            return None
        if secret is None or len(secret.get_secret_value()) < MIN_KEY_CHARS:
            if secret is not None:
                log.error("secret %s is shorter than %d characters; not used", name, MIN_KEY_CHARS)
            return None
        return _aead(secret.get_secret_value())

    def _current(self) -> AESGCM:
        key = self._key(CURRENT)
        if key is None:
            if not self._warned:
                self._warned = True
                log.warning("no secret %s: listing cursors use a per-process key (they fail after a restart)", CURRENT)
            return self._process_key
        return key

    @staticmethod
    def _aad(principal_id: str, listing: str) -> bytes:
        return json.dumps([listing, principal_id]).encode("utf-8")

    def seal(self, position: str, *, principal_id: str, listing: str) -> str:
        body = json.dumps({"p": position, "e": int(self._clock() + self._ttl)}, ensure_ascii=False).encode("utf-8")
        nonce = os.urandom(_NONCE)
        sealed = self._current().encrypt(nonce, body, _VERSION + self._aad(principal_id, listing))
        return base64.urlsafe_b64encode(_VERSION + nonce + sealed).decode().rstrip("=")

    def open(self, cursor: str, *, principal_id: str, listing: str) -> str | None:
        """The position sealed in ``cursor`` for this principal and listing, or None (whatever the reason)."""
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) < 1 + _NONCE + 16 or raw[:1] != _VERSION:
            return None
        nonce, sealed = raw[1 : 1 + _NONCE], raw[1 + _NONCE :]
        aad = _VERSION + self._aad(principal_id, listing)
        keys = [self._current(), self._key(PREVIOUS)]
        for key in keys:
            if key is None:
                continue
            try:
                body = json.loads(key.decrypt(nonce, sealed, aad))
            except (InvalidTag, ValueError):
                continue
            position, expiry = body.get("p"), body.get("e")
            if isinstance(position, str) and isinstance(expiry, int) and self._clock() <= expiry:
                return position
            return None
        return None
