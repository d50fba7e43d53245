"""``Annotated`` dependencies: components, request context, verified principals.

Components live on ``app.state`` (built in the lifespan, or passed in by
tests); routes reach them only through these accessors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request

from docquery.api.audit import AuditLog
from docquery.api.auth import ROLE_ADMIN, ROLE_QUERY, Authenticator
from docquery.api.context import RequestContext
from docquery.api.errors import ApiError
from docquery.api.limits import RateLimiter, rate_limited
from docquery.domain import Principal
from docquery.settings import Settings
from docquery.wiring import Components


async def get_components(request: Request) -> Components:
    components: Components | None = getattr(request.app.state, "components", None)
    if components is None:
        raise ApiError(503, "the service is starting", type_="unavailable", headers={"Retry-After": "1"})
    return components


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_ctx(request: Request) -> RequestContext:
    ctx: RequestContext | None = getattr(request.state, "ctx", None)
    if ctx is None:  # only when the app runs without its middleware
        ctx = RequestContext(request_id="", method=request.method)
        request.state.ctx = ctx
    return ctx


async def get_audit(request: Request) -> AuditLog:
    audit: AuditLog = request.app.state.audit
    return audit


ComponentsDep = Annotated[Components, Depends(get_components)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
CtxDep = Annotated[RequestContext, Depends(get_ctx)]


async def current_principal(request: Request, ctx: CtxDep) -> Principal:
    auth: Authenticator = request.app.state.auth
    principal = auth.authenticate(request.headers.get("authorization"))
    if principal is None:
        # 401: we do not know who this is (no credential, or one we cannot verify).
        ctx.outcome = "unauthenticated"
        raise ApiError(401, headers={"WWW-Authenticate": 'Bearer realm="docquery"'})
    ctx.principal_id = principal.id
    return principal


def require_role(role: str) -> Callable[..., Awaitable[Principal]]:
    async def dependency(
        request: Request, ctx: CtxDep, principal: Annotated[Principal, Depends(current_principal)]
    ) -> Principal:
        if role not in principal.roles:
            # 403: the caller is known and verified, but not allowed this action.
            ctx.outcome = "forbidden"
            raise ApiError(403)
        limiter: RateLimiter = request.app.state.limiter
        wait = limiter.take(principal.id)
        if wait is not None:
            ctx.outcome = "rate_limited"
            raise rate_limited(wait)
        return principal

    return dependency


QueryPrincipal = Annotated[Principal, Depends(require_role(ROLE_QUERY))]
AdminPrincipal = Annotated[Principal, Depends(require_role(ROLE_ADMIN))]
