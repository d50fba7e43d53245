"""Canary: a unique string in a document, a question, a token and an upstream echo never reaches a log or error body.

Every logger is captured at DEBUG while the canary document is ingested and
queried through every endpoint and mode, and while the error paths run
(422, 401 with the canary as a bearer token, 404 on a canary path, an
upstream error body echoing the prompt, a stream dropped mid-answer).
"""

from __future__ import annotations

import logging

import pytest

from tests.support.api_harness import Harness, JwtIssuer, bearer
from tests.support.fixtures import harness_fixture
from tests.support.standins.openai_server import StandInOpenAIServer

CANARY = "zqcanaryb7e1d4f09c"  # one lowercase word: embedders and BM25 keep it whole
AUTH = bearer("tok-alice-eng")


h = harness_fixture(llm_server="server")


# The test client's own request log ("httpx2": Starlette's TestClient) prints the URL it
# was asked to call; that is the client's log, not the service's, so it is left out.
_CLIENT_LOGGERS = ("httpx2",)


def _all_log_text(caplog: pytest.LogCaptureFixture) -> str:
    parts = []
    for rec in caplog.records:
        if rec.name.startswith(_CLIENT_LOGGERS):
            continue
        parts += [rec.name, rec.getMessage(), str(rec.args), rec.exc_text or "", str(rec.__dict__)]
    return "\n".join(parts)


def test_client_request_id_is_kept_only_when_it_is_plainly_an_id(h: Harness) -> None:
    r = h.client.get("/v1/models", headers={**AUTH, "X-Request-ID": "trace-0123456789"})
    assert r.headers["x-request-id"] == "trace-0123456789"
    r = h.client.get("/v1/models", headers={**AUTH, "X-Request-ID": "bad id\nwith newline"})
    assert r.headers["x-request-id"] != "bad id\nwith newline" and len(r.headers["x-request-id"]) == 32


def test_canary_never_logged_or_in_error_bodies(
    h: Harness, server: StandInOpenAIServer, jwt_issuer: JwtIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in list(logging.root.manager.loggerDict):
        caplog.set_level(logging.DEBUG, logger=name)
    # The model "answers" with the document text, as a real one would.
    server.config.reply = ["The secret word is ", CANARY, " [S1]."]

    h.corpus.add(
        "canary-doc", [f"The project codename is {CANARY} and it is confidential."], ["eng"], title=f"Codename {CANARY}"
    )
    question = f"what is {CANARY} codename"
    ok_bodies: list[str] = []
    error_bodies: list[str] = []

    for body in ({"question": question}, {"question": question, "stream": True}):
        r = h.client.post("/v1/query", json=body, headers=AUTH)
        assert r.status_code == 200
        ok_bodies.append(r.text)
    r = h.client.post("/v1/search", json={"query": question}, headers=AUTH)
    ok_bodies.append(r.text)
    chat = {"model": "docquery", "messages": [{"role": "user", "content": question}]}
    for stream in (False, True):
        r = h.client.post("/v1/chat/completions", json={**chat, "stream": stream}, headers=AUTH)
        assert r.status_code == 200
        ok_bodies.append(r.text)
    ok_bodies.append(h.client.get("/v1/documents", headers=AUTH).text)
    # The authorised caller does get the text: the canary test is not vacuous.
    assert all(CANARY in b for b in ok_bodies[:5])

    # Error paths, each with the canary somewhere in the request or upstream response.
    error_bodies.append(h.client.post("/v1/query", json={"question": CANARY * 300}, headers=AUTH).text)
    error_bodies.append(h.client.post("/v1/query", json={"question": question, CANARY: 1}, headers=AUTH).text)
    error_bodies.append(h.client.post("/v1/query", json={"question": question}, headers=bearer(CANARY)).text)
    error_bodies.append(
        h.client.post("/v1/query", json={"question": question}, headers=bearer(f"eyJ{CANARY}.e30.{CANARY}")).text
    )
    error_bodies.append(
        h.client.post("/v1/query", json={"question": question}, headers=bearer(jwt_issuer.token(roles=[]))).text
    )
    error_bodies.append(h.client.get(f"/v1/{CANARY}", headers=AUTH).text)
    error_bodies.append(h.client.get("/v1/models", headers={**bearer("nope"), "X-Request-ID": f"{CANARY} <x>"}).text)
    error_bodies.append(h.client.delete(f"/v1/documents/{CANARY}", headers=bearer("tok-root-admin")).text)
    server.config.fail_statuses = [400]  # the stand-in echoes the prompt (with the document) in its error
    error_bodies.append(h.client.post("/v1/query", json={"question": question}, headers=AUTH).text)
    server.config.fail_statuses = [503]
    error_bodies.append(h.client.post("/v1/chat/completions", json=chat, headers=AUTH).text)
    server.config.drop_after_chunks = 1
    r = h.client.post("/v1/query", json={"question": question, "stream": True}, headers=AUTH)
    error_bodies.append(r.text.split("event: error", 1)[-1])
    server.config.drop_after_chunks = None
    server.config.fail_statuses = []

    for body in error_bodies:
        assert '"error"' in body
        assert CANARY not in body, body
    logs = _all_log_text(caplog)
    assert "docquery.audit" in logs and "docquery.api.access" in logs  # logging was on
    assert CANARY not in logs
