"""Authentication at the request head, before any of the body is read.

Every ``/v1/`` route needs a caller. Verifying the credential here, from the headers alone, means a
client without one is answered 401 (or 429 past the failed-authentication limit) and its connection
closed before it can send a byte of body: it cannot hold a connection slot by trickling one, nor have a
malformed body parsed before anyone knows who sent it. The verified principal is left in the request
state for the route's dependency (docquery.api.deps), which then checks the role and the rate limit.

    RequestMiddleware -> AuthGateMiddleware -> BodyLimitMiddleware -> FastAPI
"""

from __future__ import annotations

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from docquery.api.deps import PRINCIPAL_STATE_KEY, verified_caller
from docquery.api.errors import ApiError, error_response

PROTECTED_PREFIX = "/v1/"


class AuthGateMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PROTECTED_PREFIX):
            await self.app(scope, receive, send)
            return
        if PRINCIPAL_STATE_KEY in scope.get("state", {}):  # a page session, verified (docquery.api.ui_gate)
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            principal = verified_caller(request)
        except ApiError as err:
            # The body, if any, is never read: the connection closes with the answer.
            refused = ApiError(err.status, err.message, type_=err.type, headers={**err.headers, "Connection": "close"})
            await error_response(request, refused)(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE_KEY] = principal
        await self.app(scope, receive, send)
