"""The page's two middlewares: its security headers, and its session cookie on the ``/v1`` routes it uses.

``UiHeadersMiddleware`` puts the page's headers on every response under ``/`` and ``/ui/`` (errors
included); ``Cache-Control: no-store`` and ``X-Content-Type-Options: nosniff`` are already on every
response (docquery.api.middleware).

``SessionMiddleware`` lets the page's session stand for a credential on exactly the ``/v1`` routes
the page calls, and nowhere else (never the OpenAI facade): a request there with no
``Authorization`` header and a session cookie gets the session's Principal, which the auth gate
(docquery.api.gate) then takes as verified. A session that does not open, or whose key or groups
are gone, is a 401 (and counts as a failed authentication); a non-GET without the session's CSRF
token is a 403. Nothing else changes: role, rate limit, fair share, ACL and audit run as for a key.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from docquery.api.auth.sessions import CSRF_HEADER, SESSION_COOKIE, Sessions, csrf_ok
from docquery.api.deps import PRINCIPAL_STATE_KEY, request_ctx
from docquery.api.errors import envelope, request_id_of
from docquery.api.limits import AuthFailureLimiter

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "require-trusted-types-for 'script'"
)
PERMISSIONS_POLICY = (
    "accelerometer=(), camera=(), clipboard-read=(), display-capture=(), geolocation=(), gyroscope=(), "
    "hid=(), magnetometer=(), microphone=(), midi=(), payment=(), serial=(), usb=(), xr-spatial-tracking=()"
)
UI_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", PERMISSIONS_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
]
# (method, path or path prefix ending in "/") the page calls with its session.
_V1 = "/v1"
SESSION_ROUTES = (
    ("POST", _V1 + "/query"),
    ("GET", _V1 + "/documents"),
    ("GET", _V1 + "/passages/"),
    ("POST", _V1 + "/documents"),  # the upload view; the route still asks for the ingest role
    ("GET", _V1 + "/documents/"),  # an uploaded document's status
    ("GET", _V1 + "/ingest/jobs/"),
)


def is_ui_path(path: str) -> bool:
    return path == "/" or path.startswith("/ui/")


def session_route(method: str, path: str) -> bool:
    # A route's other methods are not the page's (DELETE /v1/documents/{id}): the session is refused there.
    return any(method == m and (path == p or (p.endswith("/") and path.startswith(p))) for m, p in SESSION_ROUTES)


def cookie_header(name: str, value: str, *, max_age: int, path: str = "/", same_site: str = "Strict") -> str:
    return f"{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; Secure; SameSite={same_site}"


def cleared(name: str, path: str = "/") -> str:
    return cookie_header(name, "", max_age=0, path=path)


class UiHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_ui_path(scope["path"]):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in UI_HEADERS}
                kept = [(k, v) for k, v in message.get("headers", ()) if k not in names]
                message = {**message, "headers": kept + UI_HEADERS}
            await send(message)

        await self.app(scope, receive, with_headers)


class SessionMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not session_route(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie is None or "authorization" in request.headers:
            await self.app(scope, receive, send)  # a credential, or nothing: the gate's to judge
            return
        sessions: Sessions = request.app.state.ui_sessions
        failures: AuthFailureLimiter = request.app.state.auth_failures
        address = request.client.host if request.client else ""
        ctx = request_ctx(request)
        wait = failures.blocked(address)
        if wait is not None:
            ctx.outcome = "auth_rate_limited"
            retry = {"retry-after": str(max(1, math.ceil(wait)))}
            await _refuse(scope, send, 429, "too many failed authentications from this address; retry later", retry)
            return
        resolved = await sessions.resolve(cookie)
        if resolved is None:
            failures.failed(address)
            ctx.outcome = "unauthenticated"
            message = "your session has ended or is not valid; sign in again"
            await _refuse(scope, send, 401, message, {"set-cookie": cleared(SESSION_COOKIE)}, type_="session_ended")
            return
        if scope["method"] != "GET" and not csrf_ok(resolved.session, request.headers.get(CSRF_HEADER)):
            ctx.outcome = "csrf_refused"
            message = "missing or wrong CSRF token (X-CSRF-Token); reload the page"
            await _refuse(scope, send, 403, message, {}, type_="csrf_refused")
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE_KEY] = resolved.principal
        ctx.principal_id = resolved.principal.id
        if resolved.cookie is None:
            await self.app(scope, receive, send)
            return
        renewed = cookie_header(SESSION_COOKIE, resolved.cookie, max_age=_max_age(sessions, resolved.session.ends))

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (b"set-cookie", renewed.encode())]}
            await send(message)

        await self.app(scope, receive, with_cookie)


def _max_age(sessions: Sessions, ends: float) -> int:
    return max(1, int(ends - sessions.sealer.now()))


async def _refuse(
    scope: Scope, send: Send, status: int, message: str, headers: dict[str, str], *, type_: str | None = None
) -> None:
    body: Any = json.dumps(envelope(status, message, request_id_of(scope), type_=type_)).encode()
    # The body, if any, is never read: the connection closes with the answer.
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw.append((b"connection", b"close"))
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
