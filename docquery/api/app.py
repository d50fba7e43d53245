"""App factory. Components are built in the lifespan (or passed in by tests).

``create_app`` wires, per app (no module-level singletons): the
authenticator (API keys + JWKS through the secret source), the rate limiter,
a Prometheus registry, the audit chain, the error envelope and the
middleware stack::

    RequestMiddleware (request id, metrics, audit, access log, last-resort 500)
     -> UiHeadersMiddleware, SessionMiddleware (with ui.enabled: the page's headers and session cookie)
     -> AuthGateMiddleware (/v1/: 429 failed-auth limit, 401 credential, from the head alone)
       -> BodyLimitMiddleware (413 on the bytes received)
         -> FastAPI (role and rate-limit dependencies, routes, error handlers)

The prod profile refuses to build an app without an auth configuration.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from docquery.api import routes
from docquery.api.answer_html import AnswerHtml
from docquery.api.audit import AuditLog
from docquery.api.auth.authenticator import Authenticator
from docquery.api.auth.sessions import build_sessions
from docquery.api.client_address import ClientAddress
from docquery.api.cursors import CursorSealer
from docquery.api.docs_page import install_docs_page
from docquery.api.errors import install_error_handlers
from docquery.api.fairshare import LlmShare
from docquery.api.gate import AuthGateMiddleware
from docquery.api.limits import AuthFailureLimiter, BodyLimitMiddleware, RateLimiter
from docquery.api.metrics import Metrics
from docquery.api.middleware import RequestMiddleware
from docquery.api.openapi import install_openapi
from docquery.api.ui_gate import SessionMiddleware, UiHeadersMiddleware
from docquery.api.uploads.start import start_uploads, upload_body_bound
from docquery.config.settings import Settings
from docquery.core.errors import ConfigError
from docquery.core.ports import UploadProcessorFactory
from docquery.secrets import SecretSource, build_secret_source
from docquery.ui.assets import load_assets
from docquery.wiring import Components, build_components

ComponentsFactory = Callable[[Settings], Components]
log = logging.getLogger("docquery.api")


def auth_required_message(settings: Settings) -> str:
    """Why prod will not start without credentials, and where exactly they are looked for."""
    if settings.vault.url:
        where = f"Vault KV at {settings.vault.kv_mount}/{(settings.vault.kv_path or '').strip('/')}"
    else:
        where = f"the secrets dir {settings.secrets_dir.absolute()} (DOCQUERY_SECRETS_DIR)"
    return (
        f"the prod profile refuses to start without authentication: put {settings.auth.api_keys_file} in {where}, "
        f"or {settings.auth.jwks_file} there with DOCQUERY_AUTH__JWT_ISSUER and DOCQUERY_AUTH__JWT_AUDIENCE set"
    )


def authenticator(settings: Settings, source: SecretSource, metrics: Metrics | None = None) -> Authenticator:
    """The API's authenticator; the prod profile refuses to go on without an auth configuration."""
    auth = Authenticator(settings.auth, source, metrics.refused_groups.inc if metrics else None)
    if not auth.configured():
        if settings.is_prod:
            raise ConfigError(auth_required_message(settings))
        # Fail closed in dev too: with no credentials configured every request is a 401.
        log.warning("no API keys or JWKS configured: every request will be refused (401)")
    return auth


def create_app(
    settings: Settings,
    *,
    components: Components | None = None,
    factory: ComponentsFactory | None = None,
    secrets: SecretSource | None = None,
    metrics: Metrics | None = None,
    upload_processor: UploadProcessorFactory | None = None,
) -> FastAPI:
    """``metrics``: a registry already served on the metrics port (``docquery serve`` listens there first).
    ``upload_processor``: the upload worker's processor factory (default: the ``docquery.workers`` entry point)."""
    source = secrets or getattr(components, "secrets", None) or build_secret_source(settings)
    metrics = metrics or Metrics()
    auth = authenticator(settings, source, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        built = components or (factory or build_components)(settings)
        app.state.components = built
        uploads = await asyncio.to_thread(start_uploads, app, settings, built, upload_processor)
        try:
            yield
        finally:
            app.state.uploads = None
            if uploads is not None:
                await asyncio.to_thread(uploads.stop)
            app.state.components = None
            # Released even when the caller owns the components: the LLM client's pool
            # belongs to this event loop.
            await built.release_loop_resources()
            if components is None:
                built.close()

    # The schema (and the page over it) is for development and fuzzing; prod does not advertise it.
    openapi_url = None if settings.is_prod else "/openapi.json"
    # No trailing-slash redirects: Starlette builds their Location from the request's Host header.
    app = FastAPI(
        title="DocQuery",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=openapi_url,
        redirect_slashes=False,
    )
    audit = AuditLog()
    app.state.uploads = None
    app.state.settings = settings
    app.state.components = components
    app.state.auth = auth
    app.state.metrics = metrics
    app.state.audit = audit
    app.state.limiter = RateLimiter(settings.api.rate_limit_per_minute, settings.api.rate_limit_burst)
    app.state.client_address = ClientAddress(settings.api.trusted_proxies)
    app.state.cursors = CursorSealer(source, ttl_s=settings.api.cursor_ttl_s)
    app.state.auth_failures = AuthFailureLimiter(settings.api.auth_failures_per_minute, settings.api.auth_failure_burst)
    app.state.llm_share = LlmShare(
        settings.llm.max_concurrency,
        settings.api.llm_share,
        queue=settings.api.llm_queue,
        wait_s=settings.api.llm_queue_wait_s,
    )
    app.state.answer_html = AnswerHtml(settings.api.link_allowlist)
    install_error_handlers(app)
    for router in routes.ROUTERS:
        app.include_router(router)
    if settings.ui.enabled:
        app.state.ui_sessions = build_sessions(settings, source, auth)
        app.state.ui_assets = load_assets()
        for router in routes.UI_ROUTERS:
            app.include_router(router)
    install_openapi(app, settings)
    if openapi_url is not None:
        install_docs_page(app, openapi_url)
    # The upload route reads its own body as it streams in, within its own bounds (docquery.api.uploads).
    streamed = {("POST", "/v1/documents"): upload_body_bound(settings.uploads)}
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.api.max_body_bytes, streamed=streamed)
    app.add_middleware(AuthGateMiddleware)  # the credential, from the head, before any body is read
    if settings.ui.enabled:
        app.add_middleware(SessionMiddleware)  # the page's cookie, on the /v1 routes the page uses only
        app.add_middleware(UiHeadersMiddleware)
    app.add_middleware(RequestMiddleware, metrics=metrics, audit=audit)  # added last: outermost
    return app
