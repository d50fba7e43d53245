"""Envelope encryption against a real OpenBao Transit engine and a real embedded Qdrant.

Ingest logs in as ``docquery-ingest`` (datakey only), query as
``docquery-query`` (decrypt only), each with the policies from policies/vault.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hvac  # type: ignore[import-untyped]
import pytest
from qdrant_edge import Distance, EdgeConfig, EdgeShard, EdgeVectorParams, Point, UpdateOperation

from docquery.secrets.crypto import (
    CryptoError,
    EnvelopeCipher,
    KeyUnavailableError,
    TransitDataKeys,
    WrappedKey,
    key_map_from_meta,
    meta_fields_for,
    rotate_transit_key,
)
from docquery.secrets.vault import Login, VaultSession

if TYPE_CHECKING:
    from conftest import Bao

META_ID = uuid.uuid5(uuid.NAMESPACE_URL, "docquery:test:meta")


def _session(bao: Bao, workload: str) -> VaultSession:
    role = f"docquery-{workload}"
    login = Login("jwt", role=role, mount="jwt", credential_path=str(bao.write_sa_jwt(role)))
    return VaultSession(hvac.Client(url=bao.url), login)


def _root_session(bao: Bao, tmp_path: Path) -> VaultSession:
    token_file = tmp_path / "root-token"
    token_file.write_text(bao.root_token)
    return VaultSession(hvac.Client(url=bao.url), Login("token", credential_path=str(token_file)))


class KeyStore:
    """Stands in for the meta point's ``wrapped_keys`` field."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.stored: list[WrappedKey] = []

    def add(self, record: WrappedKey) -> None:
        self.stored.append(record)
        self.keys[record.key_id] = record.wrapped

    def load(self) -> dict[str, str]:
        return dict(self.keys)


def _ingest_cipher(bao: Bao, store: KeyStore) -> EnvelopeCipher:
    return EnvelopeCipher(TransitDataKeys(_session(bao, "ingest")), on_new_key=store.add)


def _query_cipher(bao: Bao, key_map: Any, **kw: Any) -> EnvelopeCipher:
    return EnvelopeCipher(TransitDataKeys(_session(bao, "query")), key_map=key_map, **kw)


def test_round_trip_ingest_encrypts_query_decrypts(bao: Bao) -> None:
    store = KeyStore()
    ingest = _ingest_cipher(bao, store)
    point = str(uuid.uuid4())
    token = ingest.encrypt("Quarterly numbers: 42", aad=point)
    assert token.startswith("dqenc:v1:v")
    assert "Quarterly" not in token
    assert len(store.stored) == 1
    assert store.stored[0].wrapped.startswith("vault:v")

    query = _query_cipher(bao, store.load)
    assert query.decrypt(token, aad=point) == "Quarterly numbers: 42"
    # The context binding: the same ciphertext on another point does not decrypt.
    with pytest.raises(CryptoError):
        query.decrypt(token, aad=str(uuid.uuid4()))


def test_each_side_can_do_only_its_half(bao: Bao) -> None:
    store = KeyStore()
    token = _ingest_cipher(bao, store).encrypt("x", aad="p")
    # Query has no datakey capability: it cannot mint keys (and has no on_new_key).
    with pytest.raises(KeyUnavailableError):
        TransitDataKeys(_session(bao, "query")).generate()
    # Ingest has no decrypt capability: a stolen ingest token cannot unwrap stored keys.
    ingest_reader = EnvelopeCipher(TransitDataKeys(_session(bao, "ingest")), key_map=store.load)
    with pytest.raises(KeyUnavailableError) as err:
        ingest_reader.decrypt(token, aad="p")
    assert "403" in str(err.value)


def test_plaintext_key_cached_for_a_bounded_time(bao: Bao) -> None:
    store = KeyStore()
    token = _ingest_cipher(bao, store).encrypt("cached", aad="p")
    now = [0.0]
    query = _query_cipher(bao, store.load, cache_s=60.0, clock=lambda: now[0])
    for _ in range(5):
        assert query.decrypt(token, aad="p") == "cached"
    assert query.unwraps == 1
    now[0] = 61.0
    assert query.decrypt(token, aad="p") == "cached"
    assert query.unwraps == 2  # unwrapped again through transit/decrypt after expiry


def test_qdrant_storage_holds_no_plaintext(bao: Bao, tmp_path: Path) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    control = f"CONTROL-{uuid.uuid4().hex}"
    shard_dir = tmp_path / "shard"
    shard_dir.mkdir()
    config = EdgeConfig(vectors={"dense": EdgeVectorParams(size=4, distance=Distance.Cosine)})
    shard = EdgeShard.create(str(shard_dir), config)
    meta = Point(id=META_ID, vector={"dense": [1.0, 0.0, 0.0, 0.0]}, payload={"kind": "meta"})
    shard.update(UpdateOperation.upsert_points([meta]))

    def store_with_collection(record: WrappedKey) -> None:
        # What the index adapter's update_meta does: merge fields with set_payload.
        shard.update(UpdateOperation.set_payload([META_ID], meta_fields_for(record)))

    ingest = EnvelopeCipher(TransitDataKeys(_session(bao, "ingest")), on_new_key=store_with_collection)
    secret_id, control_id, later_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    points = [
        Point(
            id=secret_id,
            vector={"dense": [0.1, 0.2, 0.3, 0.4]},
            payload={"kind": "chunk", "text": ingest.encrypt(canary, aad=str(secret_id))},
        ),
        # Positive control: an unencrypted payload must be found by the same scan,
        # or the scan proves nothing (e.g. if storage compressed payloads).
        Point(id=control_id, vector={"dense": [0.4, 0.3, 0.2, 0.1]}, payload={"kind": "chunk", "text": control}),
    ]
    shard.update(UpdateOperation.upsert_points(points))
    ingest.rotate_data_key()  # a second key merges into the meta point without replacing the first
    later = Point(
        id=later_id, vector={"dense": [0.2, 0.2, 0.2, 0.2]}, payload={"text": ingest.encrypt(canary, aad=str(later_id))}
    )
    shard.update(UpdateOperation.upsert_points([later]))
    shard.flush()
    shard.close()

    files = [p for p in shard_dir.rglob("*") if p.is_file()]
    assert files
    raw = b"".join(p.read_bytes() for p in files)
    assert control.encode() in raw
    assert canary.encode() not in raw
    assert canary.encode("utf-16-le") not in raw
    assert b"vault:v" in raw  # only the wrapped keys are stored with the collection

    # Query reopens the collection, loads the wrapped keys from the meta point, decrypts.
    shard = EdgeShard.load(str(shard_dir))
    try:
        stored = shard.retrieve([META_ID], with_payload=True, with_vector=False)[0].payload
        chunks = shard.retrieve([secret_id, later_id], with_payload=True, with_vector=False)
    finally:
        shard.close()
    assert len(key_map_from_meta(stored)) == 2
    query = _query_cipher(bao, lambda: key_map_from_meta(stored))
    for record in chunks:
        assert query.decrypt(record.payload["text"], aad=str(record.id)) == canary


def test_key_rotation_old_chunks_stay_readable(bao: Bao, tmp_path: Path) -> None:
    store = KeyStore()
    ingest = _ingest_cipher(bao, store)
    old = ingest.encrypt("written before rotation", aad="a")
    old_version = store.stored[-1].transit_version

    rotate_transit_key(_root_session(bao, tmp_path))  # operator action (root here)
    ingest.rotate_data_key()  # a new ingest run does the same by starting fresh
    new = ingest.encrypt("written after rotation", aad="b")

    assert len(store.stored) == 2
    assert store.stored[-1].transit_version == old_version + 1
    assert EnvelopeCipher.key_id_of(new).startswith(f"v{old_version + 1}-")
    assert EnvelopeCipher.key_id_of(old).startswith(f"v{old_version}-")
    assert store.stored[-1].wrapped.startswith(f"vault:v{old_version + 1}:")

    query = _query_cipher(bao, store.load)
    assert query.decrypt(old, aad="a") == "written before rotation"
    assert query.decrypt(new, aad="b") == "written after rotation"


def test_unknown_key_id_reloads_the_map_once(bao: Bao) -> None:
    store = KeyStore()
    ingest = _ingest_cipher(bao, store)
    first = ingest.encrypt("one", aad="1")
    loads = [0]

    def load() -> dict[str, str]:
        loads[0] += 1
        return store.load()

    query = _query_cipher(bao, load)
    assert query.decrypt(first, aad="1") == "one"
    ingest.rotate_data_key()
    second = ingest.encrypt("two", aad="2")  # a key added after query loaded the map
    assert query.decrypt(second, aad="2") == "two"
    assert loads[0] == 2
