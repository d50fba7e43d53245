"""API-key rotation under load through the real file source (no restart), on a test clock.

Like the Vault Agent, the writer replaces ``api-keys.json`` atomically (write a
temp file, rename over). Several client threads call ``ApiKeyVerifier.verify``
continuously while the test moves the source's clock, so the check interval is
exercised exactly, whatever the machine's speed:

1. the file lists OLD; clients use OLD;
2. the overlap window: the file lists OLD and NEW; NEW is accepted once the
   source's check interval has passed; clients then switch to NEW;
3. the file drops OLD; OLD is refused once the check interval has passed.

A failed request is a client token that the file listed and that was refused.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from docquery.api.auth.apikeys import ApiKeyVerifier, hash_token
from docquery.secrets import FileSecretSource
from tests.support.clock import ManualClock

OLD = "dq_old_0123456789abcdef0123456789abcdef"
NEW = "dq_new_fedcba9876543210fedcba9876543210"
CLIENTS = 4
CALLS_PER_PHASE = 50  # per client, counted, so every phase really runs under concurrent load
CHECK_INTERVAL_S = 0.25


def _write_atomically(directory: Path, entries: list[dict[str, object]]) -> None:
    tmp = directory / ".api-keys.json.tmp"
    tmp.write_text(json.dumps(entries))
    tmp.replace(directory / "api-keys.json")


def _entry(key_id: str, token: str) -> dict[str, object]:
    return {"id": key_id, "sha256": hash_token(token), "groups": ["eng"], "roles": ["query"]}


class _Load:
    """Client threads calling ``verify`` with the current token; the test waits on counts, not on time."""

    def __init__(self, verifier: ApiKeyVerifier) -> None:
        self._verifier = verifier
        self.token = OLD
        self.failed = 0
        self._calls = [0] * CLIENTS
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,)) for i in range(CLIENTS)]

    def __enter__(self) -> _Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def _client(self, i: int) -> None:
        while not self._stop.is_set():
            ok = self._verifier.verify(self.token) is not None
            with self._changed:
                self.failed += not ok
                self._calls[i] += 1
                self._changed.notify_all()

    def run_phase(self) -> None:
        """Return once every client has made CALLS_PER_PHASE more calls."""
        with self._changed:
            target = [c + CALLS_PER_PHASE for c in self._calls]
            assert self._changed.wait_for(lambda: all(c >= t for c, t in zip(self._calls, target, strict=True)), 30)


def test_rotation_under_load_takes_one_check_interval_and_fails_nothing(tmp_path: Path) -> None:
    _write_atomically(tmp_path, [_entry("ci", OLD)])
    clock = ManualClock()
    verifier = ApiKeyVerifier(FileSecretSource(tmp_path, check_interval_s=CHECK_INTERVAL_S, clock=clock))
    with _Load(verifier) as load:
        load.run_phase()
        # Overlap window: both listed. NEW becomes valid one check interval later; OLD never fails meanwhile.
        _write_atomically(tmp_path, [_entry("ci", OLD), _entry("ci", NEW)])
        clock.advance(CHECK_INTERVAL_S / 2)
        load.run_phase()
        assert verifier.verify(NEW) is None  # within the interval the source has not looked yet
        clock.advance(CHECK_INTERVAL_S / 2)
        assert verifier.verify(NEW) is not None
        load.token = NEW
        load.run_phase()
        # Drop OLD: refused one check interval later; clients on NEW keep working.
        _write_atomically(tmp_path, [_entry("ci", NEW)])
        clock.advance(CHECK_INTERVAL_S)
        assert verifier.verify(OLD) is None
        load.run_phase()
        # And it stays refused (no flapping back to a stale table), however far the clock moves.
        for _ in range(20):
            clock.advance(CHECK_INTERVAL_S)
            assert verifier.verify(OLD) is None
        load.run_phase()
    assert load.failed == 0


def test_kubernetes_style_symlink_swap_is_picked_up(tmp_path: Path) -> None:
    """Kubernetes secret/projected volumes swap a ``..data`` symlink instead of renaming files."""
    v1, v2 = tmp_path / "..v1", tmp_path / "..v2"
    v1.mkdir()
    v2.mkdir()
    (v1 / "llm-api-key").write_text("key-one\n")
    (v2 / "llm-api-key").write_text("key-two\n")
    data = tmp_path / "..data"
    data.symlink_to(v1.name)
    (tmp_path / "llm-api-key").symlink_to("..data/llm-api-key")
    clock = ManualClock()
    source = FileSecretSource(tmp_path, clock=clock)
    first = source.get_text("llm-api-key")
    assert first is not None
    assert first.get_secret_value() == "key-one"
    tmp_link = tmp_path / "..data_tmp"
    tmp_link.symlink_to(v2.name)
    tmp_link.replace(data)
    clock.advance(0.3)
    second = source.get_text("llm-api-key")
    assert second is not None
    assert second.get_secret_value() == "key-two"
    assert first.get_secret_value() == "key-one"  # what an in-flight request holds is unchanged
