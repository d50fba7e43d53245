"""Sealed cookies (docquery.ui.seal) and where the page's session counts (docquery.api.ui_gate), without a server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from docquery.api.ui_gate import session_route
from docquery.ui.seal import MAX_SEALED_CHARS, Sealer, SealError, new_key, parse_keys


class Source:
    """A secret source holding one text secret, whose version changes when it is set."""

    def __init__(self, text: str | None) -> None:
        self.text, self.n = text, 1

    def set(self, text: str | None) -> None:
        self.text, self.n = text, self.n + 1

    def get_text(self, name: str) -> SecretStr | None:
        return None if self.text is None else SecretStr(self.text)

    def get_json(self, name: str) -> Any | None:
        return None

    def version(self, name: str) -> int | None:
        return None if self.text is None else self.n


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def sealer(source: Source, clock: Clock, *, dev: bool = False) -> Sealer:
    return Sealer(source, "ui-session-keys", dev_fallback=dev, clock=clock)


def test_a_sealed_value_opens_for_its_purpose_until_it_expires() -> None:
    clock = Clock()
    s = sealer(Source(new_key()), clock)
    token = s.seal("session", {"a": 1}, 60)
    assert s.open("session", token) == {"a": 1, "exp": clock.now + 60}
    assert s.open("oidc-state", token) is None  # the purpose is the associated data
    clock.now += 59.9
    assert s.open("session", token) is not None
    clock.now += 0.2
    assert s.open("session", token) is None


@pytest.mark.parametrize(
    "token", ["", "!!!", "a", "A" * 40, "A" * (MAX_SEALED_CHARS + 1), "AAAAAAAAAAAAAAAAAAAAAAAA=="]
)
def test_garbage_opens_nothing(token: str) -> None:
    assert sealer(Source(new_key()), Clock()).open("session", token) is None


def test_rotation_the_first_key_seals_every_key_opens() -> None:
    old, new = new_key(), new_key()
    source, clock = Source(old), Clock()
    s = sealer(source, clock)
    by_old = s.seal("session", {}, 60)
    source.set(f"{new}\n{old}\n")
    by_new = s.seal("session", {}, 60)
    assert s.open("session", by_old) is not None and s.open("session", by_new) is not None
    source.set(new)
    assert s.open("session", by_old) is None and s.open("session", by_new) is not None


def test_without_keys_dev_makes_one_and_prod_seals_nothing() -> None:
    dev = sealer(Source(None), Clock(), dev=True)
    assert dev.open("session", dev.seal("session", {}, 60)) == {"exp": Clock.now + 60}
    prod = sealer(Source(None), Clock())
    with pytest.raises(SealError, match="ui-session-keys"):
        prod.seal("session", {}, 60)
    # A broken key file seals nothing either, and the error names the line, never the value.
    broken = sealer(Source("not base64 !!!"), Clock())
    with pytest.raises(SealError):
        broken.seal("session", {}, 60)


@pytest.mark.parametrize(
    ("text", "error"),
    [("", "no key"), ("# only a comment\n", "no key"), ("abc!", "line 1 is not base64url"), ("YWJj", "32-byte")],
)
def test_key_file_errors_name_the_line(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_keys(text)


def test_key_file_takes_comments_and_blank_lines() -> None:
    assert len(parse_keys(f"# current\n{new_key()}\n\n# previous\n{new_key()}\n")) == 2


@pytest.mark.parametrize(
    ("method", "path", "taken"),
    [
        ("POST", "/v1/query", True),
        ("GET", "/v1/query", False),
        ("GET", "/v1/documents", True),
        ("DELETE", "/v1/documents/x", False),
        ("GET", "/v1/documents/x", True),  # an upload's status, for the upload view
        ("POST", "/v1/documents", True),
        ("PUT", "/v1/documents", False),
        ("GET", "/v1/ingest/jobs/j", True),
        ("POST", "/v1/ingest/jobs/j", False),
        ("GET", "/v1/passages/doc/0", True),
        ("POST", "/v1/passages/doc/0", False),
        ("POST", "/v1/chat/completions", False),
        ("GET", "/v1/models", False),
        ("POST", "/v1/search", False),
        ("POST", "/v1/query/", False),
        ("POST", "/v1/queryx", False),
    ],
)
def test_the_session_counts_on_the_pages_routes_only(method: str, path: str, taken: bool) -> None:
    assert session_route(method, path) is taken
