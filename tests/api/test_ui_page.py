"""The page at ``/``: its files come from the package, small, with the page's headers on every UI response."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from docquery.api.ui_gate import CSP
from docquery.ui.assets import STATIC, load_assets
from tests.support.api_harness import Harness, JwtIssuer, make_harness

EXPECTED_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "require-trusted-types-for 'script'"
)
UI_PATHS = [
    "/",
    *(f"/ui/static/{n}" for n in STATIC),
    "/ui/session",
    "/ui/static/missing.js",
    "/ui/static/..%2fseal.py",
]


def assert_ui_headers(headers: object) -> None:
    h = dict(headers)  # type: ignore[call-overload]
    assert h["content-security-policy"] == EXPECTED_CSP
    assert h["x-content-type-options"] == "nosniff"
    assert h["referrer-policy"] == "no-referrer"
    assert h["cross-origin-opener-policy"] == "same-origin"
    assert "camera=()" in h["permissions-policy"] and "geolocation=()" in h["permissions-policy"]
    assert h["cache-control"] == "no-store"


def test_the_csp_is_the_one_the_issue_lists() -> None:
    assert CSP == EXPECTED_CSP
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP


@pytest.mark.parametrize("path", UI_PATHS)
def test_every_ui_response_carries_the_headers(shared_harness: Harness, path: str) -> None:
    r = shared_harness.client.get(path)
    assert_ui_headers(r.headers)


def test_the_page_and_its_files(shared_harness: Harness) -> None:
    page = shared_harness.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for name in STATIC:
        r = shared_harness.client.get(f"/ui/static/{name}")
        assert r.status_code == 200, name
        assert f"/ui/static/{name}" in page.text
    assert shared_harness.client.get("/ui/static/app.js").headers["content-type"].startswith("text/javascript")
    # Only the fixed names: nothing else of the package, or beside it, can be read.
    for name in ["seal.py", "..%2Fseal.py", "%2e%2e/seal.py", "index.html", "APP.JS"]:
        assert shared_harness.client.get(f"/ui/static/{name}").status_code == 404, name


def test_the_page_needs_no_other_host_and_no_inline_code() -> None:
    assets = load_assets()
    html = assets["index.html"].body.decode()
    assert "http://" not in html and "https://" not in html
    assert "<script>" not in html and " style=" not in html and " on" not in html.replace(" one", "")
    for name in STATIC:
        text = assets[name].body.decode()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text
    assert ".innerHTML = policy.createHTML(" in assets["app.js"].body.decode()
    assert assets["app.js"].body.decode().count("innerHTML") == 1


def test_first_load_is_at_most_150_kb() -> None:
    assets = load_assets()
    assert sum(len(a.body) for a in assets.values()) <= 150 * 1024


def test_the_ui_can_be_turned_off(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks(), ui={"enabled": False}):
        assert h.client.get("/").status_code == 404
        assert h.client.get("/ui/static/app.js").status_code == 404
        assert h.client.post("/ui/session", json={"api_key": "tok-alice-eng"}).status_code == 404
        # The session cookie means nothing with the page off.
        client = TestClient(h.app, base_url="https://testserver", cookies={"dq_session": "x"})
        assert client.get("/v1/documents").status_code == 401
