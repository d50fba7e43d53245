"""The page's API-key sessions: exchanged once, sealed, CSRF-bound, accepted only where the page needs them.

Each rule of docs/ui.md, through the real app: the cookie's attributes and content, CSRF on every
non-GET, the routes that take the session (and the facade, which never does), tampering generated
over the sealed bytes, revocation of the key, expiry by an injected clock, rotation of the keys that
seal, and prod without them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import string
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.api.auth.sessions import OIDC_PURPOSE, SESSION_COOKIE, SESSION_PURPOSE, Sessions, build_sessions
from docquery.core.domain import Chunk, IndexedChunk
from docquery.ui.seal import new_key
from tests.support.api_harness import KEYS, Harness, JwtIssuer, bearer, make_harness, write_api_keys

SIGN_IN_HEADERS = {"X-CSRF-Token": "sign-in"}


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("ui-session")
    for h in make_harness(tmp, jwks=jwt_issuer.jwks()):
        (h.secrets_dir / "ui-session-keys").write_text(new_key() + "\n")
        h.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        h.corpus.add("sal", ["The salary bands for engineers are reviewed each spring."], ["hr"])
        yield h


def browser(h: Harness) -> TestClient:
    """A fresh browser: https, so the Secure cookie is kept and sent."""
    return TestClient(h.app, base_url="https://testserver")


def sign_in(h: Harness, key: str = "tok-alice-eng") -> tuple[TestClient, str]:
    client = browser(h)
    r = client.post("/ui/session", json={"api_key": key}, headers=SIGN_IN_HEADERS)
    assert r.status_code == 200, r.text
    return client, r.json()["csrf"]


def test_a_key_is_exchanged_once_for_a_sealed_http_only_strict_cookie(ui: Harness) -> None:
    client = browser(ui)
    r = client.post("/ui/session", json={"api_key": "tok-alice-eng"}, headers=SIGN_IN_HEADERS)
    assert r.status_code == 200 and r.json()["principal"] == "key:alice"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    for attribute in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/", "Max-Age=28"):
        assert attribute in cookie, attribute
    value = client.cookies[SESSION_COOKIE]
    raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    digest = hashlib.sha256(b"tok-alice-eng").hexdigest()
    # Neither the key nor its digest nor the CSRF token can be read from the cookie: it is encrypted.
    for secret in (b"tok-alice-eng", digest.encode(), bytes.fromhex(digest), r.json()["csrf"].encode()):
        assert secret not in raw and secret.decode("latin-1") not in value
    who = client.get("/ui/session").json()
    assert who["signed_in"] and who["principal"] == "key:alice" and who["csrf"] == r.json()["csrf"]


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        ({"api_key": "tok-alice-eng"}, {}, 403),  # no CSRF header: a cross-site form cannot sign anyone in
        ({"api_key": "tok-wrong"}, SIGN_IN_HEADERS, 401),
        ({"api_key": ""}, SIGN_IN_HEADERS, 422),
        ({"api_key": "x" * 5000}, SIGN_IN_HEADERS, 422),
        ({"api_key": "tok-alice-eng", "groups": ["hr"]}, SIGN_IN_HEADERS, 422),
    ],
)
def test_a_refused_sign_in_sets_no_cookie(
    ui: Harness, body: dict[str, object], headers: dict[str, str], status: int
) -> None:
    client = browser(ui)
    r = client.post("/ui/session", json=body, headers=headers)
    assert r.status_code == status and "set-cookie" not in r.headers
    assert "tok-" not in r.text and "x" * 100 not in r.text
    assert client.get("/ui/session").json() == {"signed_in": False, "oidc": False}


def test_the_session_works_on_the_pages_routes_with_the_csrf_token(ui: Harness) -> None:
    client, csrf = sign_in(ui)
    q = {"question": "vacation policy days"}
    assert client.post("/v1/query", json=q).status_code == 403  # no token
    assert client.post("/v1/query", json=q, headers={"X-CSRF-Token": "wrong"}).status_code == 403
    _, other_csrf = sign_in(ui)
    assert client.post("/v1/query", json=q, headers={"X-CSRF-Token": other_csrf}).status_code == 403
    r = client.post("/v1/query", json=q, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and [c["doc_id"] for c in r.json()["citations"]] == ["vac"]
    # The same Principal as the key itself: the same answer, the same ACL.
    direct = ui.client.post("/v1/query", json=q, headers=bearer("tok-alice-eng")).json()
    assert r.json()["answer"] == direct["answer"]
    assert [d["doc_id"] for d in client.get("/v1/documents").json()["documents"]] == ["vac"]
    assert client.get("/v1/passages/vac/0").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/chat/completions", {"model": "docquery", "messages": [{"role": "user", "content": "vacation"}]}),
        ("GET", "/v1/models", None),
        ("POST", "/v1/search", {"query": "vacation"}),
        ("DELETE", "/v1/documents/vac", None),
        ("GET", "/v1/query", None),
    ],
)
def test_the_session_is_refused_everywhere_else(ui: Harness, method: str, path: str, body: object) -> None:
    client, csrf = sign_in(ui, "tok-root-admin")
    r = client.request(method, path, json=body, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 401, (path, r.text)


def test_a_passage_of_another_group_is_the_same_404_as_a_missing_one(ui: Harness) -> None:
    client, _ = sign_in(ui)
    assert client.get("/v1/passages/vac/0").json()["text"].startswith("The vacation policy")
    hidden, missing, far = (client.get(p) for p in ("/v1/passages/sal/0", "/v1/passages/nope/0", "/v1/passages/vac/9"))
    assert hidden.status_code == missing.status_code == far.status_code == 404
    strip = lambda r: {**r.json()["error"], "request_id": ""}  # noqa: E731
    assert strip(hidden) == strip(missing) == strip(far)
    assert ui.client.get("/v1/passages/sal/0", headers=bearer("tok-bob-hr")).status_code == 200


def _variants(value: str) -> st.SearchStrategy[str]:
    raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))

    def flip(args: tuple[int, int]) -> str:
        i, bit = args
        changed = bytearray(raw)
        changed[i % len(raw)] ^= 1 << bit
        return base64.urlsafe_b64encode(bytes(changed)).decode().rstrip("=")

    def cut(n: int) -> str:
        return base64.urlsafe_b64encode(raw[: n % len(raw)]).decode().rstrip("=")

    def extend(extra: bytes) -> str:
        return base64.urlsafe_b64encode(raw + extra).decode().rstrip("=")

    return st.one_of(
        st.tuples(st.integers(0, 10_000), st.integers(0, 7)).map(flip),
        st.integers(0, 10_000).map(cut),
        st.binary(min_size=1, max_size=64).map(extend),
        st.text(alphabet=string.ascii_letters + string.digits + "-_.~!*'()", max_size=200),
    )


def test_a_tampered_cookie_opens_no_session(ui: Harness) -> None:
    client, csrf = sign_in(ui)
    good = client.cookies[SESSION_COOKIE]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_variants(good))
    def check(bad: str) -> None:
        if bad == good:
            return
        tampered = TestClient(ui.app, base_url="https://testserver", cookies={SESSION_COOKIE: bad})
        r = tampered.get("/ui/session")
        assert r.status_code == 401 and r.json()["error"]["type"] == "session_ended"
        assert f"{SESSION_COOKIE}=;" in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
        r = tampered.post("/v1/query", json={"question": "vacation"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 401

    check()


def test_a_value_sealed_for_another_purpose_is_no_session(ui: Harness) -> None:
    sessions: Sessions = ui.app.state.ui_sessions
    payload = {
        "kind": "key",
        "csrf": "c",
        "ends": time.time() + 60,
        "key_digest": hashlib.sha256(b"tok-alice-eng").hexdigest(),
    }
    for purpose, status in ((SESSION_PURPOSE, 200), (OIDC_PURPOSE, 401)):
        sealed = sessions.sealer.seal(purpose, payload, 60)
        client = TestClient(ui.app, base_url="https://testserver", cookies={SESSION_COOKIE: sealed})
        assert client.get("/ui/session").status_code == status, purpose


def test_removing_the_key_ends_its_sessions_at_the_next_request(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks()):
        client, _ = sign_in(h)
        kept = TestClient(
            h.app, base_url="https://testserver", cookies={SESSION_COOKIE: client.cookies[SESSION_COOKIE]}
        )
        assert client.get("/v1/documents").status_code == 200
        write_api_keys(h.secrets_dir, {k: v for k, v in KEYS.items() if k != "tok-alice-eng"})
        deadline = time.monotonic() + 5  # the file source sees a change within 250 ms
        while client.get("/v1/documents").status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get("/v1/documents").status_code == 401
        assert client.get("/ui/session").json()["signed_in"] is False  # the 401 cleared the cookie
        assert kept.get("/ui/session").status_code == 401  # and a copy of it opens nothing either


def test_a_session_ends_after_its_max_age(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks(), ui={"session_max_age_s": 600}):
        clock = Clock()
        h.app.state.ui_sessions = build_sessions(h.settings, h.components.secrets, h.app.state.auth, clock=clock)
        client, _ = sign_in(h)
        assert (
            "Max-Age=600"
            in client.post("/ui/session", json={"api_key": "tok-alice-eng"}, headers=SIGN_IN_HEADERS).headers[
                "set-cookie"
            ]
        )
        clock.now += 599
        assert client.get("/v1/documents").status_code == 200
        clock.now += 2
        assert client.get("/v1/documents").status_code == 401


def _rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    time.sleep(0.3)  # the file source looks again after 250 ms


def test_cookie_keys_rotate(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks()):
        keys = h.secrets_dir / "ui-session-keys"
        old, new = new_key(), new_key()
        keys.write_text(old + "\n")
        client, _ = sign_in(h)
        _rewrite(keys, f"{new}\n{old}\n")  # the new key seals, the old one still opens
        assert client.get("/ui/session").status_code == 200
        fresh, _ = sign_in(h)
        _rewrite(keys, f"{new}\n")  # the old key dropped: its cookies end, the new one's stay
        assert client.get("/ui/session").status_code == 401
        assert fresh.get("/ui/session").status_code == 200


def test_prod_without_cookie_keys_refuses_sign_in(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks()):
        prod = h.settings.model_copy(update={"profile": "prod"})
        h.app.state.ui_sessions = build_sessions(prod, h.components.secrets, h.app.state.auth)
        r = browser(h).post("/ui/session", json={"api_key": "tok-alice-eng"}, headers=SIGN_IN_HEADERS)
        assert r.status_code == 503 and "set-cookie" not in r.headers
        assert r.json()["error"]["message"] == "sign-in is not configured on this service"


def test_sign_out_clears_the_cookie_and_needs_the_csrf_token(ui: Harness) -> None:
    client, csrf = sign_in(ui)
    assert client.post("/ui/session/end").status_code == 403
    assert client.get("/ui/session").json()["signed_in"]
    r = client.post("/ui/session/end", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and "Max-Age=0" in r.headers["set-cookie"]
    assert client.get("/ui/session").json()["signed_in"] is False


def test_the_documents_listing_filters_by_title(ui: Harness) -> None:
    ui.corpus.add("travel", ["Travel expenses are paid back within a month."], ["eng"], title="Travel Policy")
    client, _ = sign_in(ui)
    titles = lambda q: [d["title"] for d in client.get(f"/v1/documents?title={q}").json()["documents"]]  # noqa: E731
    assert titles("travel") == titles("TRAVEL") == ["Travel Policy"]
    assert titles("salary") == []
    assert client.get("/v1/documents?title=").status_code == 422
    assert json.dumps(titles("sal")) == "[]"  # hr's document is not found by its title either


def test_a_passage_comes_in_its_document_context(ui: Harness) -> None:
    section = "Alpha one comes first. Beta two follows it. Gamma three is next. Delta four ends the section."
    spans = [(0, 43), (23, 65), (44, len(section))]  # overlapping, as the chunker's are
    embedder, items = ui.corpus.embedder, []
    for n, (start, end) in enumerate(spans):
        text = section[start:end]
        chunk = Chunk(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"ctx/{n}")),
            doc_id="ctx",
            source="ctx.md",
            title="Context",
            chunk_index=n,
            text=text,
            content_sha256="0" * 64,
            acl_groups=("eng",),
            section=0,
            char_start=start,
            char_end=end,
        )
        items.append(IndexedChunk(chunk=chunk, dense=embedder.embed([text])[0]))
    ui.corpus.index.upsert(items)
    client, _ = sign_in(ui)
    middle = client.get("/v1/passages/ctx/1").json()
    assert middle["text"] == section[23:65]
    assert middle["before"] + middle["text"] + middle["after"] == section  # no text twice, none missing
    first, last = client.get("/v1/passages/ctx/0").json(), client.get("/v1/passages/ctx/2").json()
    assert first["before"] == "" and first["text"] + first["after"] == section[:65]
    assert last["after"] == "" and last["before"] + last["text"] == section[23:]
    # Chunks without offsets (written before offsets were stored) have no context rather than a wrong one.
    assert client.get("/v1/passages/vac/0").json()["before"] == ""
