"""The outermost ASGI middleware: request id, timing, metrics, audit, access log, last-resort 500.

Pure ASGI (no BaseHTTPMiddleware) so streamed responses pass through
untouched and the per-request cost stays small. What it logs: request id,
method, route template (never the raw path, which may carry arbitrary
text), status, duration and principal id. Never headers, bodies, questions,
documents, prompts or completions.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from docquery.api.audit import AuditLog
from docquery.api.context import RequestContext, new_request_id
from docquery.api.errors import envelope
from docquery.api.metrics import Metrics
from docquery.runtime.logs import REQUEST_ID

log = logging.getLogger("docquery.api.access")

_UNAUDITED = {"/healthz", "/readyz"}
_SECURITY_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
]


class RequestMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, audit: AuditLog) -> None:
        self.app = app
        self.metrics = metrics
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ctx = RequestContext(request_id=new_request_id(_header(scope, b"x-request-id")), method=scope["method"])
        scope.setdefault("state", {})["ctx"] = ctx
        rid_token = REQUEST_ID.set(ctx.request_id)  # every log line of this request carries its id
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                ctx.status = int(message["status"])
                headers = list(message.get("headers", ()))
                headers.append((b"x-request-id", ctx.request_id.encode()))
                headers.extend(_SECURITY_HEADERS)
                timing = _server_timing(ctx)
                if timing:
                    headers.append((b"server-timing", timing.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:
            # Last resort. Type name only: an unknown exception's message may carry content.
            log.error("unhandled %s in request %s", type(exc).__name__, ctx.request_id)
            ctx.outcome = "error:internal_error"
            if not started:
                await _send_500(send, ctx)
            else:
                ctx.status = ctx.status or 500
        finally:
            for cleanup in ctx.cleanups:
                cleanup()
            self._finish(scope, ctx)
            REQUEST_ID.reset(rid_token)

    def _finish(self, scope: Scope, ctx: RequestContext) -> None:
        route = scope.get("route")
        # The matched route's template, never the raw path: a fixed set (metrics labels, audit).
        template = getattr(route, "path", None)
        ctx.route = template if isinstance(template, str) and template.startswith("/") else "unmatched"
        elapsed = ctx.elapsed()
        status = ctx.status or 500
        outcome = ctx.outcome or ("ok" if status < 400 else f"http_{status}")
        self.metrics.observe_request(ctx.route, ctx.method, status, elapsed)
        if ctx.trace is not None:
            self.metrics.observe_trace(ctx.trace)
        if ctx.route not in _UNAUDITED:
            doc_ids, chunk_ids = ctx.returned()
            self.audit.record(
                request_id=ctx.request_id,
                principal=ctx.principal_id,
                method=ctx.method,
                route=ctx.route,
                status=status,
                outcome=outcome,
                doc_ids=doc_ids,
                chunk_ids=chunk_ids,
                duration_ms=elapsed * 1000.0,
                question_rewritten=ctx.trace is not None and ctx.trace.rewritten,
                detail=ctx.audit_detail,
            )
        # DEBUG: the audit record above is the per-request line at INFO; this one repeats it
        # in text form for local debugging without a second write per request in production.
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request %s %s %s -> %d %s in %.1f ms principal=%r",
                ctx.request_id,
                ctx.method,
                ctx.route,
                status,
                outcome,
                elapsed * 1000.0,
                ctx.principal_id,
            )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            try:
                return str(value.decode("latin-1"))
            except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
                return None
    return None


def _server_timing(ctx: RequestContext) -> str:
    """Stage durations (ms) for the benchmark and for operators; durations only."""
    t = ctx.trace
    parts: list[str] = []
    if t is not None:
        if t.embed_s:
            parts.append(f"embed;dur={t.embed_s * 1000:.3f}")
        if t.search_s:
            parts.append(f"search;dur={t.search_s * 1000:.3f}")
        if t.llm_total_s is not None:
            parts.append(f"llm;dur={t.llm_total_s * 1000:.3f}")
        elif t.llm_ttft_s is not None:
            parts.append(f"llm;dur={t.llm_ttft_s * 1000:.3f}")
    if parts:
        parts.append(f"app;dur={ctx.elapsed() * 1000:.3f}")
    return ", ".join(parts)


async def _send_500(send: Send, ctx: RequestContext) -> None:
    ctx.status = 500
    body: Any = json.dumps(envelope(500, "internal error", ctx.request_id, type_="internal_error")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 500,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-request-id", ctx.request_id.encode()),
                *_SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
