"""ApiKeyVerifier: hashed keys only, constant-time over all entries, fail closed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from docquery.api.auth import apikeys
from docquery.api.auth.apikeys import ApiKeyEntry, ApiKeyVerifier, hash_token, parse_key_file
from docquery.secrets import FileSecretSource, SecretUnavailableError

TOKEN = "dq_live_8f14e45fceea167a5a36dedd4bea2543"


class DictSource:
    """A SecretSource over a dict, counting parses."""

    def __init__(self, data: Any = None) -> None:
        self.data = data
        self.ver = 1
        self.reads = 0
        self.fail = False

    def set(self, data: Any) -> None:
        self.data = data
        self.ver += 1

    def get_text(self, name: str) -> None:
        return None

    def get_json(self, name: str) -> Any:
        self.reads += 1
        return self.data

    def version(self, name: str) -> int | None:
        if self.fail:
            raise SecretUnavailableError("cannot read secret file 'api-keys.json'")
        return None if self.data is None else self.ver


def _entry(key_id: str, token: str, groups: list[str] | None = None, roles: list[str] | None = None) -> dict[str, Any]:
    return {"id": key_id, "sha256": hash_token(token), "groups": groups or ["eng"], "roles": roles or ["query"]}


def test_valid_token_returns_its_entry() -> None:
    source = DictSource([_entry("ci", TOKEN, ["eng", "ops"], ["query", "admin"]), _entry("other", "x" * 40)])
    entry = ApiKeyVerifier(source).verify(TOKEN)
    assert entry == ApiKeyEntry("ci", frozenset({"eng", "ops"}), frozenset({"query", "admin"}))


@pytest.mark.parametrize("token", ["", "wrong", TOKEN + "x", TOKEN[:-1], hash_token(TOKEN), "x" * 5000])
def test_other_tokens_are_refused(token: str) -> None:
    assert ApiKeyVerifier(DictSource([_entry("ci", TOKEN)])).verify(token) is None


def test_uppercase_hex_accepted() -> None:
    entry = _entry("ci", TOKEN)
    entry["sha256"] = entry["sha256"].upper()
    assert ApiKeyVerifier(DictSource([entry])).verify(TOKEN) is not None


def test_every_entry_is_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """No early exit: the time does not tell which entry matched."""
    calls: list[int] = []
    real = apikeys.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(apikeys.hmac, "compare_digest", counting)
    verifier = ApiKeyVerifier(DictSource([_entry("ci", TOKEN)] + [_entry(f"k{i}", f"t{i}") for i in range(9)]))
    assert verifier.verify(TOKEN) is not None
    assert len(calls) == 10
    calls.clear()
    assert verifier.verify("nope") is None
    assert len(calls) == 10


def test_table_parsed_once_per_version() -> None:
    source = DictSource([_entry("ci", TOKEN)])
    verifier = ApiKeyVerifier(source)
    for _ in range(10):
        assert verifier.verify(TOKEN) is not None
    assert source.reads == 1
    source.set([_entry("ci", "new-token")])
    assert verifier.verify(TOKEN) is None
    assert verifier.verify("new-token") is not None
    assert source.reads == 2


def test_overlap_window_then_drop() -> None:
    source = DictSource([_entry("ci", TOKEN)])
    verifier = ApiKeyVerifier(source)
    source.set([_entry("ci", TOKEN), _entry("ci", "new-token")])
    assert verifier.verify(TOKEN) is not None
    assert verifier.verify("new-token") is not None
    source.set([_entry("ci", "new-token")])
    assert verifier.verify(TOKEN) is None
    assert verifier.verify("new-token") is not None


@pytest.mark.parametrize(
    "data",
    [
        {"id": "ci"},
        [["not", "an", "object"]],
        [{"sha256": hash_token(TOKEN), "groups": [], "roles": []}],
        [{"id": "ci", "sha256": "abc", "groups": [], "roles": []}],
        [{"id": "ci", "sha256": TOKEN, "groups": [], "roles": []}],
        [{"id": "ci", "sha256": hash_token(TOKEN), "groups": "eng", "roles": []}],
        [{"id": "ci", "sha256": hash_token(TOKEN), "groups": ["eng"], "roles": [1]}],
        [_entry("a", TOKEN), _entry("b", TOKEN)],
    ],
)
def test_malformed_file_fails_closed_and_logs_no_content(data: Any, caplog: pytest.LogCaptureFixture) -> None:
    good = _entry("good", "good-token")
    payload = [good, *data] if isinstance(data, list) else data
    with caplog.at_level(logging.ERROR):
        verifier = ApiKeyVerifier(DictSource(payload))
        assert verifier.verify("good-token") is None  # one bad entry rejects the whole file
        assert verifier.verify(TOKEN) is None
        assert verifier.key_count() == 0
    assert "rejected" in caplog.text
    assert hash_token(TOKEN) not in caplog.text
    assert hash_token("good-token") not in caplog.text
    assert TOKEN not in caplog.text


def test_malformed_json_file_fails_closed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "api-keys.json").write_text('[{"id": "ci", "sha256": "' + hash_token(TOKEN))
    with caplog.at_level(logging.ERROR):
        assert ApiKeyVerifier(FileSecretSource(tmp_path)).verify(TOKEN) is None
    assert "not valid JSON" in caplog.text
    assert hash_token(TOKEN) not in caplog.text


def test_missing_file_means_no_valid_key(tmp_path: Path) -> None:
    verifier = ApiKeyVerifier(FileSecretSource(tmp_path))
    assert verifier.verify(TOKEN) is None
    assert verifier.key_count() == 0


def test_unreadable_source_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    source = DictSource([_entry("ci", TOKEN)])
    verifier = ApiKeyVerifier(source)
    assert verifier.verify(TOKEN) is not None
    source.fail = True
    with caplog.at_level(logging.ERROR):
        assert verifier.verify(TOKEN) is None
    assert "refusing every API key" in caplog.text


def test_file_source_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "api-keys.json").write_text(json.dumps([_entry("ci", TOKEN)]))
    entry = ApiKeyVerifier(FileSecretSource(tmp_path)).verify(TOKEN)
    assert entry is not None
    assert entry.id == "ci"


def test_parse_key_file_empty_list() -> None:
    assert parse_key_file([]) == ()
