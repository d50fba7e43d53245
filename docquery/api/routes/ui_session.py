"""The page's sign-in, backend-for-frontend: ``/ui/session`` (API key), ``/ui/oidc/*`` (OIDC), sign-out.

* ``GET /ui/session``: whether this browser is signed in, as whom, and the session's CSRF token;
* ``POST /ui/session`` ``{"api_key": "..."}``: the key, posted once, exchanged for a session cookie;
* ``POST /ui/session/end``: sign-out (the cookie is cleared, an OIDC refresh token revoked);
* ``GET /ui/oidc/start`` and ``GET /ui/oidc/callback``: authorization code with PKCE.

Every POST carries ``X-CSRF-Token``: the session's token once there is a session; before it (the
sign-in itself) any value, since a cross-site page cannot send a custom header without a CORS
preflight this service never grants. Errors met during a browser navigation (the callback) are a
page with one sentence; errors of calls made by the page's script are the API's JSON envelope.
"""

from __future__ import annotations

import hmac
import logging
import math
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from docquery.api.auth.sessions import (
    CSRF_HEADER,
    OIDC_COOKIE,
    OIDC_PURPOSE,
    OIDC_STATE_TTL_S,
    SESSION_COOKIE,
    Session,
    Sessions,
    csrf_ok,
)
from docquery.api.deps import request_ctx
from docquery.api.errors import ApiError
from docquery.api.limits import AuthFailureLimiter
from docquery.api.ui_gate import cleared, cookie_header
from docquery.core.domain import Principal
from docquery.core.errors import DocQueryError
from docquery.ui.assets import error_page
from docquery.ui.oidc import OidcError, pkce_pair
from docquery.ui.seal import SealError

log = logging.getLogger("docquery.ui")
router = APIRouter(prefix="/ui", include_in_schema=False)
_OIDC_PATH = "/ui/oidc"
_MAX_KEY_CHARS = 4096


class KeySignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key: str = Field(min_length=1, max_length=_MAX_KEY_CHARS)


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.ui_sessions
    return sessions


def _who(principal: Principal, session: Session) -> dict[str, Any]:
    return {
        "signed_in": True,
        "principal": principal.id,
        "groups": sorted(principal.groups),
        "roles": sorted(principal.roles),  # which views the page offers; every route checks the role itself
        "kind": session.kind,
        "csrf": session.csrf,
    }


def _limit(request: Request) -> tuple[AuthFailureLimiter, str]:
    failures: AuthFailureLimiter = request.app.state.auth_failures
    address = request.client.host if request.client else ""
    wait = failures.blocked(address)
    if wait is not None:
        request_ctx(request).outcome = "auth_rate_limited"
        raise ApiError(
            429,
            "too many failed sign-ins from this address; retry later",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
    return failures, address


def _max_age(sessions: Sessions, session: Session) -> int:
    return max(1, int(session.ends - sessions.sealer.now()))


@router.get("/session")
async def current(request: Request) -> Response:
    sessions = _sessions(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie is None:
        return JSONResponse({"signed_in": False, "oidc": sessions.oidc is not None})
    failures, address = _limit(request)
    resolved = await sessions.resolve(cookie)
    if resolved is None:
        failures.failed(address)
        request_ctx(request).outcome = "unauthenticated"
        raise ApiError(
            401,
            "your session has ended or is not valid; sign in again",
            type_="session_ended",
            headers={"Set-Cookie": cleared(SESSION_COOKIE)},
        )
    request_ctx(request).principal_id = resolved.principal.id
    body = {**_who(resolved.principal, resolved.session), "oidc": sessions.oidc is not None}
    response = JSONResponse(body)
    if resolved.cookie is not None:
        response.headers["Set-Cookie"] = cookie_header(
            SESSION_COOKIE, resolved.cookie, max_age=_max_age(sessions, resolved.session)
        )
    return response


@router.post("/session")
async def sign_in_with_key(body: KeySignIn, request: Request) -> Response:
    if not request.headers.get(CSRF_HEADER):
        raise ApiError(403, "missing CSRF header (X-CSRF-Token); reload the page", type_="csrf_refused")
    failures, address = _limit(request)
    sessions = _sessions(request)
    try:
        started = sessions.start_with_key(body.api_key)
    except SealError as exc:
        log.error("page sign-in refused: %s", exc)
        raise ApiError(503, "sign-in is not configured on this service", type_="unavailable") from None
    ctx = request_ctx(request)
    if started is None:
        failures.failed(address)
        ctx.outcome = "unauthenticated"
        raise ApiError(401, "that API key is not valid", type_="unauthorized")
    principal, session, sealed = started
    ctx.principal_id, ctx.outcome = principal.id, "signed_in"
    response = JSONResponse({**_who(principal, session), "oidc": sessions.oidc is not None})
    response.headers["Set-Cookie"] = cookie_header(SESSION_COOKIE, sealed, max_age=_max_age(sessions, session))
    return response


@router.post("/session/end")
async def sign_out(request: Request) -> Response:
    sessions = _sessions(request)
    session = sessions.open(request.cookies.get(SESSION_COOKIE))
    if session is not None:
        if not csrf_ok(session, request.headers.get(CSRF_HEADER)):
            raise ApiError(403, "missing or wrong CSRF token (X-CSRF-Token); reload the page", type_="csrf_refused")
        await sessions.end(session)
    request_ctx(request).outcome = "signed_out"
    response = JSONResponse({"signed_in": False, "oidc": sessions.oidc is not None})
    response.headers["Set-Cookie"] = cleared(SESSION_COOKIE)
    return response


# Pages for errors met in the browser's navigation through the sign-in: (status, title, sentence).
OIDC_OFF = (404, "Single sign-on is off", "This service has no OpenID provider configured; sign in with a key.")
NOT_SEALED = (503, "Sign-in is not configured", "This service cannot seal its cookies; tell its operator.")
PROVIDER_DOWN = (502, "The sign-in service did not answer", "Try again in a minute; if it persists, tell IT.")
STATE_MISSING = (400, "Sign-in expired", "This sign-in was not started here or took too long. Start it again.")
STATE_WRONG = (400, "Sign-in refused", "The sign-in service's answer does not match this browser's sign-in.")
PROVIDER_REFUSED = (400, "Sign-in refused", "The sign-in service did not sign you in. Start again.")
EXCHANGE_FAILED = (502, "Sign-in failed", "The sign-in service did not confirm the sign-in. Start again.")
TOKEN_REFUSED = (403, "Sign-in refused", "Your identity provider's token is not accepted by this service.")


class _SignInFailed(DocQueryError):
    def __init__(self, page: tuple[int, str, str]) -> None:
        super().__init__(page[1])
        self.page = page


def _page(page: tuple[int, str, str]) -> HTMLResponse:
    status, title, message = page
    response = HTMLResponse(error_page(title, message), status_code=status)
    response.headers["Set-Cookie"] = cleared(OIDC_COOKIE, _OIDC_PATH)
    return response


@router.get("/oidc/start")
async def oidc_start(request: Request) -> Response:
    sessions = _sessions(request)
    if sessions.oidc is None:
        return _page(OIDC_OFF)
    state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    verifier, challenge = pkce_pair()
    try:
        sealed = sessions.sealer.seal(
            OIDC_PURPOSE, {"state": state, "nonce": nonce, "verifier": verifier}, OIDC_STATE_TTL_S
        )
        target = await sessions.oidc.authorization_url(state, nonce, challenge)
    except SealError as exc:
        log.error("oidc sign-in refused: %s", exc)
        return _page(NOT_SEALED)
    except OidcError as exc:
        log.warning("oidc start failed: %s", exc)
        return _page(PROVIDER_DOWN)
    response = RedirectResponse(target, status_code=302)
    # Lax, not Strict: the provider sends the browser back here from its own site, and this cookie
    # (state and PKCE verifier, no session) must come with that navigation.
    response.headers["Set-Cookie"] = cookie_header(
        OIDC_COOKIE, sealed, max_age=int(OIDC_STATE_TTL_S), path=_OIDC_PATH, same_site="Lax"
    )
    return response


@router.get("/oidc/callback")
async def oidc_callback(
    request: Request,
    code: Annotated[str | None, Query(max_length=4096)] = None,
    state: Annotated[str | None, Query(max_length=512)] = None,
    error: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    sessions = _sessions(request)
    ctx = request_ctx(request)
    try:
        principal, session, sealed = await _finish_sign_in(request, sessions, code, state, error)
    except _SignInFailed as failed:
        ctx.outcome = "signin_refused"
        return _page(failed.page)
    ctx.principal_id, ctx.outcome = principal.id, "signed_in"
    # A relative Location: never built from the Host header.
    response = Response(status_code=303, headers={"Location": "/"})
    response.headers.append("Set-Cookie", cookie_header(SESSION_COOKIE, sealed, max_age=_max_age(sessions, session)))
    response.headers.append("Set-Cookie", cleared(OIDC_COOKIE, _OIDC_PATH))
    return response


async def _finish_sign_in(
    request: Request, sessions: Sessions, code: str | None, state: str | None, error: str | None
) -> tuple[Principal, Session, str]:
    if sessions.oidc is None:
        raise _SignInFailed(OIDC_OFF)
    started = sessions.sealer.open(OIDC_PURPOSE, request.cookies.get(OIDC_COOKIE))
    if started is None:
        raise _SignInFailed(STATE_MISSING)
    expected = str(started.get("state", ""))
    if not state or not hmac.compare_digest(expected.encode(), state.encode("utf-8", "replace")):
        raise _SignInFailed(STATE_WRONG)
    if error is not None or not code:
        raise _SignInFailed(PROVIDER_REFUSED)
    try:
        tokens = await sessions.oidc.exchange(code, str(started.get("verifier", "")))
        opened = sessions.start_with_tokens(tokens.access_token, tokens.refresh_token)
    except OidcError as exc:
        log.warning("oidc code exchange failed: %s", exc)
        raise _SignInFailed(EXCHANGE_FAILED) from None
    except SealError as exc:
        log.error("oidc sign-in refused: %s", exc)
        raise _SignInFailed(NOT_SEALED) from None
    if opened is None:
        raise _SignInFailed(TOKEN_REFUSED)
    return opened
