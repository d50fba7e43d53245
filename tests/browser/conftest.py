"""The page in a real browser: Debian's chromium (driven by Playwright) against a real ``docquery serve``.

Everything starts here, once per session: the examples corpus (plus one document with a hostile
title) ingested on the embedded engine by ``docquery ingest``, the stand-in LLM and an OpenID
provider (oidc-provider-mock) in threads on loopback, ``docquery serve`` as a subprocess, and one
chromium. Each test gets a fresh browser context (its own cookies) and page, with every request it
makes recorded and every ``securitypolicyviolation`` counted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Request, Route, sync_playwright

from docquery.ui.seal import new_key
from tests.support.oidc_idp import AUDIENCE, CLIENT_ID, Idp, User, running_idp
from tests.support.standins.openai_server import DEFAULT_KEY, StandInOpenAIServer

CHROMIUM = Path("/usr/bin/chromium")
NO_CHROMIUM = "browser tests need Debian's chromium at /usr/bin/chromium: apt-get install -y chromium"

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# token -> (key id, groups, roles)
KEYS = {
    "tok-staff-browser": ("staff-user", ["staff"], ["query"]),
    "tok-security-browser": ("security-user", ["security"], ["query"]),
    "tok-uploader-browser": ("uploader", ["staff"], ["query", "ingest"]),
}
STAFF_KEY, SECURITY_KEY, UPLOADER_KEY = "tok-staff-browser", "tok-security-browser", "tok-uploader-browser"
HOSTILE_TITLE = 'Parking <img src=x onerror="window.__pwned=1"> ![t](https://evil.example/t.png) \u202eevil'
# Runs before the page's own script: counts every CSP violation the page reports (window.__csp).
INIT_SCRIPT = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@dataclass
class Service:
    url: str
    llm: StandInOpenAIServer
    idp: Idp
    data_dir: Path
    env: dict[str, str]


@dataclass
class Recorded:
    page: Page
    context: BrowserContext
    requests: list[str] = field(default_factory=list)
    bodies: list[tuple[str, str | None]] = field(default_factory=list)

    def csp_violations(self) -> list[str]:
        found: list[str] = self.page.evaluate("window.__csp")
        return found

    def pwned(self) -> bool:
        return bool(self.page.evaluate("typeof window.__pwned !== 'undefined'"))


def _free_port() -> int:
    # The OIDC redirect URI names the service's port, so it is chosen before the service starts.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _corpus(tmp: Path) -> Path:
    corpus = tmp / "corpus"
    shutil.copytree(REPO / "examples", corpus)
    (corpus / "handbook" / "parking.md").write_text(
        f"# {HOSTILE_TITLE}\n\nThe parking garage opens at seven. Staff park on level two; visitors on level one.\n"
    )
    return corpus


def _secrets(tmp: Path, idp: Idp) -> Path:
    secrets = tmp / "secrets"
    secrets.mkdir()
    entries = [
        {"id": kid, "sha256": hashlib.sha256(tok.encode()).hexdigest(), "groups": groups, "roles": roles}
        for tok, (kid, groups, roles) in KEYS.items()
    ]
    (secrets / "api-keys.json").write_text(json.dumps(entries))
    (secrets / "ui-session-keys").write_text(new_key() + "\n")
    (secrets / "ui-oidc-client-secret").write_text("browser-client-secret\n")
    (secrets / "jwks.json").write_text(json.dumps(idp.jwks()))
    (secrets / "llm-api-key").write_text(DEFAULT_KEY + "\n")
    (secrets / "embedder-api-key").write_text(DEFAULT_KEY + "\n")
    return secrets


def _run(cmd: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="session")
def chromium_present() -> None:
    if not CHROMIUM.exists():
        pytest.skip(NO_CHROMIUM)


@pytest.fixture(scope="package")
def service(chromium_present: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("browser")
    users = [
        User(sub="ann", claims={"groups": ["staff"], "roles": ["query"]}),
        User(sub="sam", claims={"groups": ["security"], "roles": ["query"]}),
    ]
    with running_idp(users) as idp, StandInOpenAIServer() as llm:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
        env.update(
            HF_HUB_OFFLINE="1",
            DOCQUERY_DATA_DIR=str(tmp / "data"),
            DOCQUERY_SECRETS_DIR=str(_secrets(tmp, idp)),
            DOCQUERY_METRICS_PORT="0",
            DOCQUERY_LOG_FORMAT="json",
            DOCQUERY_LLM__BASE_URL=llm.base_url,
            DOCQUERY_LLM__MODEL="standin-model",
            # The stand-in's hashed bag-of-words embeddings: no model to load in two processes, so the
            # whole setup stays in seconds; hybrid search (with BM25) finds the examples by their words.
            DOCQUERY_EMBEDDER__KIND="openai",
            DOCQUERY_EMBEDDER__BASE_URL=llm.base_url,
            DOCQUERY_EMBEDDER__MODEL="standin-embedder",
            DOCQUERY_EMBEDDER__DIMENSION="64",
            DOCQUERY_RETRIEVAL__MIN_DENSE_SCORE="0.1",
            # The hostile document is indexed, not quarantined, so its title reaches the page.
            DOCQUERY_INGEST__QUARANTINE_FLAGGED="false",
            DOCQUERY_AUTH__JWT_ISSUER=idp.issuer,
            DOCQUERY_AUTH__JWT_AUDIENCE=AUDIENCE,
            DOCQUERY_API__RATE_LIMIT_PER_MINUTE="100000",
            DOCQUERY_API__RATE_LIMIT_BURST="10000",
            DOCQUERY_UI__OIDC_ISSUER=idp.issuer,
            DOCQUERY_UI__OIDC_CLIENT_ID=CLIENT_ID,
            DOCQUERY_UI__OIDC_REDIRECT_URI=f"{url}/ui/oidc/callback",
        )
        _run([sys.executable, "-m", "docquery.cli", "ingest", str(_corpus(tmp))], env)
        proc = subprocess.Popen(
            [sys.executable, "-m", "docquery.cli", "serve", "--port", str(port)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_listening(proc)
            yield Service(url, llm, idp, tmp / "data", env)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if re.search(r"listening on http://", line):
                found.set()

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(180):
        proc.kill()
        raise AssertionError("docquery serve did not start:\n" + "".join(lines[-30:]))


# Package scope, not session: Playwright's sync API marks an event loop running in this thread until it
# stops, and every later test that calls asyncio.run would fail.
@pytest.fixture(scope="package")
def browser(chromium_present: None) -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def open_page(browser: Browser, service: Service, *, width: int = 1280, **context_options: Any) -> Recorded:
    context = browser.new_context(viewport={"width": width, "height": 900}, **context_options)
    context.add_init_script(INIT_SCRIPT)
    page = context.new_page()
    recorded = Recorded(page, context)

    def on_request(request: Request) -> None:
        # The page's requests; the OpenID provider's own pages (its form loads a stylesheet from a CDN)
        # are not ours to judge.
        try:
            origin = request.frame.url
        except Exception:  # a request of no frame (a worker): counted as the page's
            origin = service.url
        if origin.startswith(service.idp.issuer + "/"):
            return
        recorded.requests.append(request.url)
        recorded.bodies.append((request.url, request.post_data))

    def loopback_only(route: Route) -> None:
        # Nothing here may leave the machine; a request elsewhere fails at once rather than waiting on DNS.
        if route.request.url.startswith(("http://127.0.0.1:", "http://localhost:")):
            route.continue_()
        else:
            route.abort()

    page.on("request", on_request)
    context.route("**/*", loopback_only)
    page.goto(service.url + "/")
    return recorded


def assert_clean(tab: Recorded, service: Service) -> None:
    """What every test checks of its page: every request went to the service (or, signing in, to the
    OpenID provider), no CSP violation was reported, and no injected script ran."""
    elsewhere = [u for u in tab.requests if not u.startswith((service.url + "/", service.idp.issuer + "/"))]
    assert not elsewhere, elsewhere
    assert tab.csp_violations() == []
    assert not tab.pwned()


@pytest.fixture
def tab(browser: Browser, service: Service) -> Iterator[Recorded]:
    recorded = open_page(browser, service)
    try:
        yield recorded
        assert_clean(recorded, service)
    finally:
        recorded.context.close()
