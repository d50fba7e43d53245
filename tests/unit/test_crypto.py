"""EnvelopeCipher with a local stand-in for Transit (AES-GCM key wrapping).

The real Transit engine is exercised in tests/integration/test_vault_transit.py.
"""

from __future__ import annotations

import base64
import os
import re

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from docquery.config.settings import Settings
from docquery.secrets import SecretsError
from docquery.secrets.crypto import (
    CryptoError,
    DecryptionError,
    EnvelopeCipher,
    KeyUnavailableError,
    WrappedKey,
    build_envelope_cipher,
    key_map_from_meta,
    meta_fields_for,
    parse_key_map,
)

TOKEN_RE = re.compile(r"^dqenc:v1:v\d+-[0-9a-f]{12}:[A-Za-z0-9_-]+$")


class FakeTransit:
    """Stand-in for Transit: wraps data keys under a local KEK, with a version counter."""

    def __init__(self) -> None:
        self.version = 1
        self.keks = {1: AESGCM.generate_key(256)}
        self.generated = 0
        self.unwrapped = 0

    def rotate(self) -> None:
        self.version += 1
        self.keks[self.version] = AESGCM.generate_key(256)

    def generate(self) -> tuple[bytes, str]:
        self.generated += 1
        key = os.urandom(32)
        nonce = os.urandom(12)
        wrapped = nonce + AESGCM(self.keks[self.version]).encrypt(nonce, key, None)
        return key, f"vault:v{self.version}:{base64.b64encode(wrapped).decode()}"

    def unwrap(self, wrapped: str) -> bytes:
        self.unwrapped += 1
        _, version, body = wrapped.split(":", 2)
        raw = base64.b64decode(body)
        return AESGCM(self.keks[int(version[1:])]).decrypt(raw[:12], raw[12:], None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Store:
    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.loads = 0

    def add(self, record: WrappedKey) -> None:
        self.keys[record.key_id] = record.wrapped

    def load(self) -> dict[str, str]:
        self.loads += 1
        return dict(self.keys)


def _pair(
    transit: FakeTransit, clock: Clock | None = None, **kw: float
) -> tuple[EnvelopeCipher, EnvelopeCipher, Store]:
    store = Store()
    clock = clock or Clock()
    ingest = EnvelopeCipher(transit, on_new_key=store.add, clock=clock, **kw)  # type: ignore[arg-type]
    query = EnvelopeCipher(transit, key_map=store.load, clock=clock, **kw)  # type: ignore[arg-type]
    return ingest, query, store


@pytest.mark.parametrize("text", ["hello", "", "ünïcödé ✓ 文字", "x" * 100_000])
def test_round_trip(text: str) -> None:
    ingest, query, _ = _pair(FakeTransit())
    token = ingest.encrypt(text, aad="point-1")
    assert TOKEN_RE.match(token)
    assert query.decrypt(token, aad="point-1") == text


def test_same_plaintext_encrypts_differently() -> None:
    ingest, _, _ = _pair(FakeTransit())
    assert ingest.encrypt("same", aad="p") != ingest.encrypt("same", aad="p")


def test_context_binding() -> None:
    ingest, query, _ = _pair(FakeTransit())
    token = ingest.encrypt("secret text", aad="point-1")
    with pytest.raises(DecryptionError) as err:
        query.decrypt(token, aad="point-2")
    assert "secret text" not in str(err.value)


def test_key_id_is_bound_too() -> None:
    transit = FakeTransit()
    ingest, query, _ = _pair(transit)
    a = ingest.encrypt("a", aad="p")
    ingest.rotate_data_key()
    b = ingest.encrypt("b", aad="p")
    swapped = ":".join([*b.split(":")[:2], EnvelopeCipher.key_id_of(a), b.split(":")[3]])
    with pytest.raises(DecryptionError):
        query.decrypt(swapped, aad="p")


def test_tampered_ciphertext_fails() -> None:
    ingest, query, _ = _pair(FakeTransit())
    token = ingest.encrypt("payload", aad="p")
    body = bytearray(base64.urlsafe_b64decode(token.split(":")[3] + "=="))
    body[-1] ^= 1
    bad = ":".join([*token.split(":")[:3], base64.urlsafe_b64encode(bytes(body)).decode().rstrip("=")])
    with pytest.raises(DecryptionError):
        query.decrypt(bad, aad="p")


@pytest.mark.parametrize(
    "token",
    [
        "plain text",
        "dqenc:v2:v1-0123456789ab:AAAA",
        "dqenc:v1:bad:AAAA",
        "dqenc:v1:v1-0123456789ab:!!",
        "dqenc:v1:v1-0123456789ab:AAAA",
    ],
)
def test_malformed_tokens(token: str) -> None:
    _, query, _ = _pair(FakeTransit())
    with pytest.raises(DecryptionError):
        query.decrypt(token)


def test_wrapped_key_persisted_before_first_ciphertext() -> None:
    transit = FakeTransit()

    def refuse(record: WrappedKey) -> None:
        raise RuntimeError("meta point write failed")

    cipher = EnvelopeCipher(transit, on_new_key=refuse)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        cipher.encrypt("never without its key")


def test_query_side_cannot_encrypt() -> None:
    _, query, _ = _pair(FakeTransit())
    with pytest.raises(CryptoError):
        query.encrypt("x")


def test_ingest_data_key_lives_at_most_cache_s() -> None:
    transit, clock = FakeTransit(), Clock()
    ingest, query, store = _pair(transit, clock, cache_s=60.0)
    first = ingest.encrypt("a")
    clock.now = 30.0
    assert EnvelopeCipher.key_id_of(ingest.encrypt("b")) == EnvelopeCipher.key_id_of(first)
    clock.now = 61.0
    later = ingest.encrypt("c")
    assert EnvelopeCipher.key_id_of(later) != EnvelopeCipher.key_id_of(first)
    assert transit.generated == 2
    assert len(store.keys) == 2
    assert query.decrypt(first) == "a"
    assert query.decrypt(later) == "c"


def test_query_key_cache_is_bounded_in_time_and_size() -> None:
    transit, clock = FakeTransit(), Clock()
    ingest, query, _ = _pair(transit, clock, cache_s=10.0)
    tokens = []
    for i in range(3):
        tokens.append(ingest.encrypt(str(i)))
        ingest.rotate_data_key()
    for t in tokens:
        query.decrypt(t)
    assert query.unwraps == 3
    query.decrypt(tokens[0])
    assert query.unwraps == 3
    clock.now = 11.0
    query.decrypt(tokens[0])
    assert query.unwraps == 4
    query.forget_keys()
    query.decrypt(tokens[0])
    assert query.unwraps == 5

    small = EnvelopeCipher(transit, key_map=query._load_key_map, max_cached_keys=2, clock=clock)  # type: ignore[arg-type]
    for t in tokens:
        small.decrypt(t)
    small.decrypt(tokens[0])  # evicted by the third key
    assert small.unwraps == 4


def test_rotation_new_version_old_readable() -> None:
    transit = FakeTransit()
    ingest, query, _ = _pair(transit)
    old = ingest.encrypt("old")
    transit.rotate()
    ingest.rotate_data_key()
    new = ingest.encrypt("new")
    assert EnvelopeCipher.key_id_of(old).startswith("v1-")
    assert EnvelopeCipher.key_id_of(new).startswith("v2-")
    assert (query.decrypt(old), query.decrypt(new)) == ("old", "new")


def test_unknown_key_id() -> None:
    transit = FakeTransit()
    ingest, _, _ = _pair(transit)
    token = ingest.encrypt("x")
    stranger = EnvelopeCipher(transit, key_map=dict)  # type: ignore[arg-type]
    with pytest.raises(DecryptionError, match="unknown data key"):
        stranger.decrypt(token)


def test_transit_failure_is_key_unavailable() -> None:
    class Down(FakeTransit):
        def unwrap(self, wrapped: str) -> bytes:
            raise KeyUnavailableError("cannot unwrap a data key: vault transit decrypt failed (HTTP 503)")

    ingest, _, store = _pair(FakeTransit())
    token = ingest.encrypt("x")
    with pytest.raises(KeyUnavailableError):
        EnvelopeCipher(Down(), key_map=store.load).decrypt(token)  # type: ignore[arg-type]


def test_parse_key_map() -> None:
    good = {"v2-0123456789ab": "vault:v2:QUJD"}
    assert parse_key_map(good) == good
    assert parse_key_map(None) == {}
    for bad in (["x"], {"v1-0123456789ab": "vault:v2:QUJD"}, {"k": "vault:v1:QUJD"}, {"v1-0123456789ab": "plain"}):
        with pytest.raises(CryptoError):
            parse_key_map(bad)


def test_wrapped_key_version() -> None:
    assert WrappedKey("v3-0123456789ab", "vault:v3:QUJD").transit_version == 3


def test_factory() -> None:
    assert build_envelope_cipher(Settings()) is None
    with pytest.raises(SecretsError, match="VAULT__URL"):
        build_envelope_cipher(Settings(encryption={"enabled": True}))


def test_meta_point_fields_round_trip() -> None:
    a = WrappedKey("v1-0123456789ab", "vault:v1:QUJD")
    b = WrappedKey("v2-ba9876543210", "vault:v2:REVG")
    meta = {"kind": "meta", "model_id": "m", **meta_fields_for(a), **meta_fields_for(b)}
    assert meta_fields_for(a) == {"wrapped_key:v1-0123456789ab": "vault:v1:QUJD"}
    assert key_map_from_meta(meta) == {a.key_id: a.wrapped, b.key_id: b.wrapped}
    assert key_map_from_meta(None) == {}
    assert key_map_from_meta({"wrapped_keys": {a.key_id: a.wrapped}}) == {a.key_id: a.wrapped}
    with pytest.raises(CryptoError):
        key_map_from_meta({"wrapped_key:v1-0123456789ab": "not-a-transit-ciphertext"})
