"""Sealed listing cursors: tampering, replay across principals and listings, expiry, key rotation."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from docquery.api.cursors import CURRENT, PREVIOUS, CursorSealer
from tests.support.clock import ManualClock

KEY_A, KEY_B = "a" * 40, "b" * 40


class Secrets:
    """An in-memory secret source: a change is visible at once."""

    def __init__(self, **values: str) -> None:
        self.values = dict(values)

    def get_text(self, name: str) -> SecretStr | None:
        value = self.values.get(name)
        return SecretStr(value) if value is not None else None

    def get_json(self, name: str) -> Any | None:
        return None

    def version(self, name: str) -> int | None:
        return hash(self.values.get(name))


def sealer(clock: ManualClock | None = None, **values: str) -> tuple[CursorSealer, Secrets]:
    source = Secrets(**({CURRENT: KEY_A} | values))
    return CursorSealer(source, ttl_s=600, clock=clock or ManualClock(1_000_000)), source


def raw(cursor: str) -> bytes:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))


def text(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@given(position=st.text(max_size=80))
def test_a_cursor_opens_for_its_principal_and_listing_and_hides_its_position(position: str) -> None:
    s, _ = sealer()
    cursor = s.seal(position, principal_id="key:alice", listing="documents")
    assert s.open(cursor, principal_id="key:alice", listing="documents") == position
    if len(position) >= 4:
        assert position.encode() not in raw(cursor)
    assert s.seal(position, principal_id="key:alice", listing="documents") != cursor  # a fresh nonce each time


def test_every_byte_flipped_is_refused() -> None:
    s, _ = sealer()
    cursor = s.seal("doc-1234", principal_id="key:alice", listing="documents")
    data = raw(cursor)
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            tampered = bytearray(data)
            tampered[i] ^= bit
            assert s.open(text(bytes(tampered)), principal_id="key:alice", listing="documents") is None, i
    for cut in range(len(data)):
        assert s.open(text(data[:cut]), principal_id="key:alice", listing="documents") is None
    assert s.open(text(data + b"\x00"), principal_id="key:alice", listing="documents") is None


@given(other=st.text(min_size=1, max_size=20).filter(lambda p: p != "key:alice"))
def test_a_cursor_replayed_by_another_principal_or_listing_is_refused(other: str) -> None:
    s, _ = sealer()
    cursor = s.seal("doc-1", principal_id="key:alice", listing="documents")
    assert s.open(cursor, principal_id=other, listing="documents") is None
    assert s.open(cursor, principal_id="key:alice", listing=other) is None


def test_a_cursor_expires() -> None:
    clock = ManualClock(1_000_000)
    s, _ = sealer(clock)
    cursor = s.seal("doc-1", principal_id="p", listing="documents")
    clock.advance(600)
    assert s.open(cursor, principal_id="p", listing="documents") == "doc-1"
    clock.advance(1)
    assert s.open(cursor, principal_id="p", listing="documents") is None


def test_rotation_keeps_walks_in_progress_until_the_previous_key_is_dropped() -> None:
    s, source = sealer()
    old = s.seal("doc-1", principal_id="p", listing="documents")
    source.values = {CURRENT: KEY_B, PREVIOUS: KEY_A}
    assert s.open(old, principal_id="p", listing="documents") == "doc-1"
    new = s.seal("doc-2", principal_id="p", listing="documents")
    source.values = {CURRENT: KEY_B}
    assert s.open(old, principal_id="p", listing="documents") is None
    assert s.open(new, principal_id="p", listing="documents") == "doc-2"


def test_a_short_key_is_not_used_and_without_one_a_process_key_seals() -> None:
    s, source = sealer(**{CURRENT: "short"})
    cursor = s.seal("doc-1", principal_id="p", listing="documents")
    assert s.open(cursor, principal_id="p", listing="documents") == "doc-1"
    other, _ = sealer(**{CURRENT: "short"})
    assert other.open(cursor, principal_id="p", listing="documents") is None  # another process's key
    source.values = {CURRENT: KEY_A}
    assert s.open(cursor, principal_id="p", listing="documents") is None


@pytest.mark.parametrize("garbage", ["", "A", "AQ", "AAAA" * 20, text(b"\x01" + b"\x00" * 40), text(b"\x02" * 60)])
def test_garbage_is_refused(garbage: str) -> None:
    s, _ = sealer()
    assert s.open(garbage, principal_id="p", listing="documents") is None
