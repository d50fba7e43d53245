"""API-key verification against the hashed key file (``api-keys.json``, docs/contract.md).

The file holds only SHA-256 hex digests of the full tokens::

    [{"id": "ci-bot", "sha256": "<64 hex>", "groups": ["eng"], "roles": ["query"], "tenant": "eng-tools",
      "may_grant": ["eng-readers"]}]

``tenant`` (optional) names whose LLM share the key draws on; without it, its set of groups does. It is also
the namespace of the key's uploads. ``may_grant`` (optional) lists groups the key may give the documents it
uploads besides its own.

Rotation: an operator (through Vault) first lists the old and the new key
together (the overlap window, both valid), then drops the old one. The file is
re-read through the :class:`~docquery.secrets.SecretSource`, so the dropped key
is refused within the source's check interval (250 ms for files), with no restart.

Fail closed: a missing, unreadable or malformed file means no key is valid.
The error log names the file and what is wrong, never its content.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from docquery.core.collection import GROUP_NAME_RULE, is_valid_group_name
from docquery.core.errors import ConfigError
from docquery.secrets import SecretsError, SecretSource

log = logging.getLogger(__name__)

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
# Longer bearer tokens are not ours; refuse before hashing attacker-sized input.
MAX_TOKEN_CHARS = 4096


@dataclass(frozen=True)
class ApiKeyEntry:
    id: str
    groups: frozenset[str]
    roles: frozenset[str]
    tenant: str | None = None
    may_grant: frozenset[str] = frozenset()


class ApiKeyFileError(ConfigError, ValueError):
    """The key file is malformed; the message says where, never what the value was."""


def hash_token(token: str) -> str:
    """The digest to store in ``api-keys.json`` for ``token``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_key_file(data: Any) -> tuple[tuple[bytes, ApiKeyEntry], ...]:
    """Validate the whole file; any bad entry rejects the file (a partial table hides mistakes)."""
    if not isinstance(data, list):
        raise ApiKeyFileError("top level must be a list of entries")
    table: list[tuple[bytes, ApiKeyEntry]] = []
    seen_digests: set[bytes] = set()
    seen_ids: set[str] = set()
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise ApiKeyFileError(f"entry {i} is not an object")
        key_id, digest = raw.get("id"), raw.get("sha256")
        if not isinstance(key_id, str) or not key_id.strip():
            raise ApiKeyFileError(f"entry {i} has no id")
        if not isinstance(digest, str) or not _HEX64.match(digest):
            raise ApiKeyFileError(f"entry {i}: sha256 must be 64 hex characters")
        groups = _string_set(raw.get("groups", []), f"entry {i}: groups")
        if not all(is_valid_group_name(g) for g in groups):
            raise ApiKeyFileError(f"entry {i}: groups: {GROUP_NAME_RULE}")
        roles = _string_set(raw.get("roles", []), f"entry {i}: roles")
        may_grant = _string_set(raw.get("may_grant", []), f"entry {i}: may_grant")
        if not all(is_valid_group_name(g) for g in may_grant):
            raise ApiKeyFileError(f"entry {i}: may_grant: {GROUP_NAME_RULE}")
        tenant = raw.get("tenant")
        if tenant is not None and not (isinstance(tenant, str) and tenant and tenant == tenant.strip()):
            raise ApiKeyFileError(f"entry {i}: tenant must be a non-empty string without surrounding spaces")
        raw_digest = bytes.fromhex(digest)
        if raw_digest in seen_digests:
            # Two entries for one token would make its groups ambiguous.
            raise ApiKeyFileError(f"entry {i} repeats another entry's sha256")
        if key_id in seen_ids:
            log.warning("api key id %r appears more than once (allowed during rotation)", key_id)
        seen_digests.add(raw_digest)
        seen_ids.add(key_id)
        table.append((raw_digest, ApiKeyEntry(key_id, groups, roles, tenant, may_grant)))
    return tuple(table)


def _string_set(value: Any, where: str) -> frozenset[str]:
    # Taken as written, never trimmed: the ACL compares exactly, so " hr" would silently match nothing.
    if not isinstance(value, list) or not all(isinstance(v, str) and v and v == v.strip() for v in value):
        raise ApiKeyFileError(f"{where} must be a list of non-empty strings without surrounding spaces")
    return frozenset(value)


class ApiKeyVerifier:
    """``verify(token)`` -> the matching entry or None. Thread-safe, cheap per call.

    The parsed table is cached per version of the file; the source decides
    when a new version is visible (files: stat at most every 250 ms).
    """

    def __init__(self, source: SecretSource, filename: str = "api-keys.json") -> None:
        self._source = source
        self._filename = filename
        self._lock = threading.Lock()
        self._version: int | object | None = object()  # "never loaded"
        self._table: tuple[tuple[bytes, ApiKeyEntry], ...] = ()

    def verify(self, token: str) -> ApiKeyEntry | None:
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        return _match(self._current_table(), hashlib.sha256(token.encode("utf-8")).digest())

    def verify_digest(self, digest: bytes) -> ApiKeyEntry | None:
        """The entry whose key has this SHA-256 digest, while the file still lists it (a page session
        keeps the digest, never the key, and is re-checked on each request)."""
        return _match(self._current_table(), digest) if len(digest) == 32 else None

    def key_count(self) -> int:
        """Number of valid entries now (0 when the file is missing or malformed)."""
        return len(self._current_table())

    def _current_table(self) -> Sequence[tuple[bytes, ApiKeyEntry]]:
        try:
            version = self._source.version(self._filename)
        except SecretsError as exc:
            log.error("api key file %s unavailable (%s); refusing every API key", self._filename, exc)
            return ()
        if version == self._version:
            return self._table
        with self._lock:
            if version == self._version:
                return self._table
            self._table = self._load(version)
            self._version = version
            return self._table

    def _load(self, version: int | None) -> tuple[tuple[bytes, ApiKeyEntry], ...]:
        if version is None:
            log.warning("api key file %s is absent; no API key is valid", self._filename)
            return ()
        try:
            table = parse_key_file(self._source.get_json(self._filename))
        except (SecretsError, ApiKeyFileError) as exc:
            log.error("api key file %s rejected (%s); refusing every API key until fixed", self._filename, exc)
            return ()
        log.info("api key file %s loaded: %d keys (version %s)", self._filename, len(table), version)
        return table


def _match(table: Sequence[tuple[bytes, ApiKeyEntry]], digest: bytes) -> ApiKeyEntry | None:
    # Compare against every entry, with no early exit, so the time taken does
    # not reveal which entry (if any) matched or how far a guess got.
    found: ApiKeyEntry | None = None
    for stored, entry in table:
        if hmac.compare_digest(stored, digest):
            found = entry
    return found
