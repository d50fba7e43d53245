"""Hostile upload requests, generated: malformed multipart bodies, hostile file names and fields. Each gets
202, 400, 413 or 422 (never a 5xx); a refused one leaves nothing in the spool, and no name that reaches a
record, a log line or an answer holds a path, a control character or more than the bound."""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api_harness import Harness, JwtIssuer, make_harness
from tests.support.uploads import UPLOAD_KEYS, auth, drain, spooled, write_upload_keys

MAX_NAME = 40


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    limits = {"max_name_bytes": MAX_NAME, "max_files": 3, "max_file_bytes": 2048}
    limits |= {"rate_limit_per_minute": 100_000, "rate_limit_burst": 100_000, "queue": 10_000}
    for harness in make_harness(tmp_path_factory.mktemp("hostile"), jwks=jwt_issuer.jwks(), uploads=limits):
        write_upload_keys(harness.secrets_dir)
        deadline = time.monotonic() + 10
        while harness.app.state.auth.api_keys.key_count() != 5 + len(UPLOAD_KEYS):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield harness


hostile_chars = st.sampled_from(["/", "\\", "..", "\x00", "\x1b[2J", "\n", "\r", "\u202e", "\u200b", "\ufeff", " "])
file_names = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(hostile_chars, st.text(max_size=5)), max_size=8).map("".join),
    st.just("a" * (MAX_NAME + 1)),
)
fields = st.sampled_from(["files", "groups", "public", "other", "FILES", "files[]", ""])


def _quote(value: str) -> bytes:
    return value.replace("\\", "\\\\").replace('"', '\\"').encode("utf-8", "surrogatepass")


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, str]:
    boundary = draw(st.sampled_from(["b0undary", "x", "-" * 70, "a b"]))
    out = b""
    for _ in range(draw(st.integers(min_value=0, max_value=5))):
        field = draw(fields)
        name = draw(st.none() | file_names)
        disposition = b'form-data; name="' + _quote(field) + b'"'
        if name is not None:
            disposition += b'; filename="' + _quote(name) + b'"'
        data = draw(st.one_of(st.binary(max_size=64), st.just(b"eng"), st.just(b"x" * 3000)))
        out += b"--" + boundary.encode() + b"\r\nContent-Disposition: " + disposition + b"\r\n\r\n" + data + b"\r\n"
    if draw(st.booleans()):
        out += b"--" + boundary.encode() + b"--\r\n"
    cut = draw(st.integers(min_value=0, max_value=len(out)))
    if draw(st.booleans()):
        out = out[:cut] + draw(st.binary(max_size=16)) + out[cut:]
    content_type = draw(
        st.sampled_from(
            [f"multipart/form-data; boundary={boundary}", f'multipart/form-data; boundary="{boundary}"', "text/plain"]
        )
    )
    return out, content_type


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=bodies())
def test_hostile_bodies_never_5xx_and_leave_nothing(h: Harness, case: tuple[bytes, str]) -> None:
    body, content_type = case
    headers = {**auth("tok-up-eng"), "Content-Type": content_type}
    r = h.client.post("/v1/documents", headers=headers, content=body)
    assert r.status_code in (202, 400, 413, 422), r.text
    if r.status_code != 202:
        assert r.json()["error"]["message"]
        drain(h)
        assert spooled(h) == []
        return
    for doc in r.json()["documents"]:
        name = doc["name"]
        assert "/" not in name and "\\" not in name and name not in (".", "..")
        assert len(name.encode()) <= MAX_NAME
        assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name)


def test_no_hostile_name_reaches_a_log_line(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    hostile = ["../../etc/passwd", "x\x1b[31m.txt", "rlo\u202etxt.exe", "nl\nx.txt", "a" * 200]
    with caplog.at_level(logging.DEBUG):
        for name in hostile:
            # Written raw: an HTTP client would escape some of these characters in the name.
            body = b'--b\r\nContent-Disposition: form-data; name="groups"\r\n\r\neng\r\n'
            body += b'--b\r\nContent-Disposition: form-data; name="files"; filename="' + _quote(name) + b'"\r\n\r\n'
            body += b"text\r\n--b--\r\n"
            headers = {**auth("tok-up-eng"), "Content-Type": "multipart/form-data; boundary=b"}
            r = h.client.post("/v1/documents", headers=headers, content=body)
            assert r.status_code in (400, 422), (name, r.text)
        drain(h)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "\x1b" not in text and "\u202e" not in text and "etc/passwd" not in text and "a" * 200 not in text
    assert spooled(h) == []
