"""The one dependency each protected route takes: its verified, authorised, rate-checked call.

Components live on ``app.state`` (built in the lifespan, or passed in by
tests); routes reach them only through :class:`Call`.

One dependency per route, not a graph of small ones: the checks run in one
visible order (failed-auth limit 429, credential 401, role 403, rate limit 429).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from docquery.api.auth.authenticator import ROLE_ADMIN, ROLE_INGEST, ROLE_QUERY, Authenticator
from docquery.api.context import RequestContext
from docquery.api.errors import ApiError
from docquery.api.fairshare import LlmShare, tenant_of
from docquery.api.limits import AuthFailureLimiter, RateLimiter, rate_limited
from docquery.api.sse import prime
from docquery.config.settings import Settings
from docquery.core.domain import Principal
from docquery.rag.pipeline import StreamEvent
from docquery.wiring import Components


@dataclass(frozen=True)
class Call:
    principal: Principal
    settings: Settings
    ctx: RequestContext
    request: Request

    def llm_slot(self) -> LlmSlot:
        """A slot of the LLM's in-flight calls, on the caller's tenant's share (503 when none comes in
        time): taken before the request's first LLM call (a follow-up's rewrite counts too), ``async
        with`` it around a generation, or ``take``/``give_back`` around a stream."""
        slot = LlmSlot(self.request.app.state.llm_share, tenant_of(self.principal))
        self.ctx.cleanups.append(slot.give_back)  # never leaked, even if a stream never starts
        return slot

    @property
    def components(self) -> Components:
        """503 while the service is starting (the lifespan has not built them yet)."""
        components: Components | None = getattr(self.request.app.state, "components", None)
        if components is None:
            raise ApiError(503, "the service is starting", type_="unavailable", headers={"Retry-After": "1"})
        return components


@dataclass
class LlmSlot:
    share: LlmShare
    tenant: str
    held: bool = False

    async def take(self) -> None:
        """Idempotent: a request holds one slot for all its LLM calls (the rewrite, then the answer)."""
        if not self.held:
            await self.share.acquire(self.tenant)
            self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.share.release(self.tenant)

    async def prime(self, events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
        """Take the slot and pull the stream's first events; the slot goes back if that fails
        (after that, the stream's body gives it back when it ends)."""
        await self.take()
        try:
            return await prime(events)
        except BaseException:
            self.give_back()
            raise

    async def __aenter__(self) -> LlmSlot:
        await self.take()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.give_back()


def request_ctx(request: Request) -> RequestContext:
    ctx: RequestContext | None = getattr(request.state, "ctx", None)
    if ctx is None:  # only when the app runs without its middleware
        ctx = RequestContext(request_id="", method=request.method)
        request.state.ctx = ctx
    return ctx


# Where the gate (docquery.api.gate) leaves the caller it verified from the request head.
PRINCIPAL_STATE_KEY = "principal"


def verified_caller(request: Request) -> Principal:
    """The failed-authentication limit (429), then the credential (401): from the request head alone."""
    ctx = request_ctx(request)
    auth: Authenticator = request.app.state.auth
    failures: AuthFailureLimiter = request.app.state.auth_failures
    address = request.app.state.client_address.bucket(request.scope)
    wait = failures.blocked(address)
    if wait is not None:
        # Before verifying: the same 429 for every credential, so it reveals none.
        ctx.outcome = "auth_rate_limited"
        raise ApiError(
            429,
            "too many failed authentications from this address; retry later",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
    credential = request.headers.get("authorization")
    principal = auth.authenticate(credential)
    if principal is None:
        # 401: we do not know who this is (no credential, or one we cannot verify).
        if credential:
            failures.failed(address)  # a guess; a request with no credential is not one
        ctx.outcome = "unauthenticated"
        raise ApiError(401, headers={"WWW-Authenticate": 'Bearer realm="docquery"'})
    ctx.principal_id = principal.id
    return principal


def authorize(*roles: str) -> Callable[[Request], Awaitable[Call]]:
    """The caller must hold one of ``roles``."""

    async def dependency(request: Request) -> Call:
        ctx = request_ctx(request)
        known: Principal | None = request.scope.get("state", {}).get(PRINCIPAL_STATE_KEY)
        principal = known or verified_caller(request)
        if principal.roles.isdisjoint(roles):
            # 403: the caller is known and verified, but not allowed this action.
            ctx.outcome = "forbidden"
            raise ApiError(403)
        limiter: RateLimiter = request.app.state.limiter
        wait = limiter.take(principal.id)
        if wait is not None:
            ctx.outcome = "rate_limited"
            raise rate_limited(wait)
        return Call(principal=principal, settings=request.app.state.settings, ctx=ctx, request=request)

    return dependency


QueryCall = Annotated[Call, Depends(authorize(ROLE_QUERY))]
AdminCall = Annotated[Call, Depends(authorize(ROLE_ADMIN))]
IngestCall = Annotated[Call, Depends(authorize(ROLE_INGEST))]
# A document's or a job's status: readers of the document and its uploader alike.
StatusCall = Annotated[Call, Depends(authorize(ROLE_QUERY, ROLE_INGEST, ROLE_ADMIN))]
