"""OIDC sign-in for the page (authorization code + PKCE) against a real OpenID provider on loopback.

The browser's part is played by an HTTP client that follows the redirects itself and submits the
provider's authorization form, as a person would click it. The service's part is the real app.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from docquery.api.auth.sessions import SESSION_COOKIE, build_sessions
from docquery.ui.seal import new_key
from tests.support.api_harness import Harness, make_harness
from tests.support.oidc_idp import IDP_WARNINGS, Idp, User, running_idp, ui_oidc_settings

pytestmark = IDP_WARNINGS
REDIRECT = "https://testserver/ui/oidc/callback"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def idp() -> Iterator[Idp]:
    users = [
        User(sub="ann", claims={"groups": ["eng"], "roles": ["query"]}),
        User(sub="hal", claims={"groups": ["hr"], "roles": ["query"]}),
    ]
    with running_idp(users) as provider:
        yield provider


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory, idp: Idp, clock: Clock) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("ui-oidc")
    for harness in make_harness(tmp, jwks=idp.jwks(), **ui_oidc_settings(idp, REDIRECT)):
        (harness.secrets_dir / "ui-session-keys").write_text(new_key() + "\n")
        # A confidential client (the provider's code grant takes client_secret_basic).
        (harness.secrets_dir / "ui-oidc-client-secret").write_text("page-client-secret\n")
        harness.app.state.ui_sessions = build_sessions(
            harness.settings, harness.components.secrets, harness.app.state.auth, clock=clock
        )
        harness.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        yield harness


def start(h: Harness) -> tuple[TestClient, str, dict[str, list[str]]]:
    browser = TestClient(h.app, base_url="https://testserver", follow_redirects=False)
    r = browser.get("/ui/oidc/start")
    assert r.status_code == 302, r.text
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "Secure" in cookie and "SameSite=Lax" in cookie and "Path=/ui/oidc" in cookie
    return browser, r.headers["location"], parse_qs(urlsplit(r.headers["location"]).query)


def approve(location: str, sub: str) -> dict[str, list[str]]:
    """The person at the provider's form: signs in as ``sub``; returns the callback's query."""
    r = httpx.post(location, data={"sub": sub}, follow_redirects=False)
    assert r.status_code == 302, r.text
    target = r.headers["location"]
    assert target.startswith(REDIRECT)
    return parse_qs(urlsplit(target).query)


def sign_in(h: Harness, sub: str) -> tuple[TestClient, str]:
    browser, location, _ = start(h)
    answer = approve(location, sub)
    r = browser.get("/ui/oidc/callback", params={"code": answer["code"][0], "state": answer["state"][0]})
    assert r.status_code == 303 and r.headers["location"] == "/", r.text
    who = browser.get("/ui/session").json()
    return browser, who["csrf"]


def test_the_authorization_request_uses_pkce_s256_and_a_fresh_state(h: Harness, idp: Idp) -> None:
    _, location, query = start(h)
    _, _, again = start(h)
    assert location.startswith(f"{idp.issuer}/")
    assert query["response_type"] == ["code"] and query["code_challenge_method"] == ["S256"]
    assert query["redirect_uri"] == [REDIRECT] and query["client_id"] == ["docquery-page"]
    assert len(query["state"][0]) >= 32 and query["state"] != again["state"]
    assert query["code_challenge"] != again["code_challenge"]


def test_sign_in_gives_the_principal_of_the_access_token(h: Harness) -> None:
    browser, csrf = sign_in(h, "ann")
    who = browser.get("/ui/session").json()
    assert who["principal"] == "jwt:ann" and who["groups"] == ["eng"] and who["kind"] == "oidc"
    r = browser.post("/v1/query", json={"question": "vacation policy days"}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and [c["doc_id"] for c in r.json()["citations"]] == ["vac"]
    # The session holds the tokens sealed: no JWT (a base64url header segment, then a dot) is in the cookie, as
    # text or once base64-decoded. Three characters alone ("eyJ") turn up in random ciphertext now and then.
    cookie = browser.cookies[SESSION_COOKIE]
    jwt_start = re.compile(rb"eyJ[A-Za-z0-9_-]{7,}\.")
    assert jwt_start.search(cookie.encode()) is None
    assert jwt_start.search(base64.urlsafe_b64decode(cookie + "=" * (-len(cookie) % 4))) is None


def test_the_code_is_redeemed_with_the_verifier_of_its_challenge(h: Harness, idp: Idp) -> None:
    browser, location, query = start(h)
    answer = approve(location, "ann")
    before = len(idp.token_requests)
    browser.get("/ui/oidc/callback", params={"code": answer["code"][0], "state": answer["state"][0]})
    (sent,) = idp.token_requests[before:]
    assert sent["grant_type"] == "authorization_code" and sent["code"] == answer["code"][0]
    assert sent["redirect_uri"] == REDIRECT
    verifier = sent["code_verifier"]
    assert 43 <= len(verifier) <= 128  # RFC 7636
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    assert challenge == query["code_challenge"][0]


@pytest.mark.parametrize("case", ["wrong-state", "no-state", "no-cookie", "provider-error", "no-code"])
def test_a_bad_callback_gets_a_page_and_no_session(h: Harness, case: str) -> None:
    browser, location, _ = start(h)
    answer = approve(location, "ann")
    params = {"code": answer["code"][0], "state": answer["state"][0]}
    if case == "wrong-state":
        params["state"] = params["state"][:-2] + ("AA" if not params["state"].endswith("AA") else "BB")
    elif case == "no-state":
        del params["state"]
    elif case == "no-cookie":
        browser.cookies.clear()
    elif case == "provider-error":
        params = {"error": "access_denied", "state": params["state"]}
    elif case == "no-code":
        del params["code"]
    r = browser.get("/ui/oidc/callback", params=params)
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/html")
    assert "Sign-in" in r.text and "<script" not in r.text
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert SESSION_COOKIE not in browser.cookies
    assert browser.get("/ui/session").json()["signed_in"] is False


def test_groups_are_checked_again_through_the_refresh_token(h: Harness, idp: Idp, clock: Clock) -> None:
    browser, _ = sign_in(h, "hal")
    assert browser.get("/ui/session").json()["groups"] == ["hr"]
    idp.set_user("hal", {"groups": ["eng"], "roles": ["query"]})
    clock.now += 299  # within the re-check interval: the groups of the access token stand
    assert browser.get("/ui/session").json()["groups"] == ["hr"]
    clock.now += 2
    r = browser.get("/ui/session")
    assert r.json()["groups"] == ["eng"] and SESSION_COOKIE in r.headers["set-cookie"]
    assert [d["doc_id"] for d in browser.get("/v1/documents").json()["documents"]] == ["vac"]
    idp.revoke_user("hal")
    clock.now += 301
    assert browser.get("/v1/documents").status_code == 401  # the provider refused the refresh: the session ends


def test_sign_out_ends_the_session(h: Harness) -> None:
    browser, csrf = sign_in(h, "ann")
    r = browser.post("/ui/session/end", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and "Max-Age=0" in r.headers["set-cookie"]
    assert browser.get("/ui/session").json()["signed_in"] is False


def test_oidc_start_without_a_provider_is_a_page(tmp_path: Path) -> None:
    for plain in make_harness(tmp_path):
        r = plain.client.get("/ui/oidc/start", follow_redirects=False)
        assert r.status_code == 404 and "single sign-on" in r.text.lower()
