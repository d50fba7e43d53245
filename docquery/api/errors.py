"""One error envelope for every failure the API returns.

``{"error": {"type": "...", "message": "...", "request_id": "..."}}``

Messages are fixed strings chosen here, never ``str(exc)``: an upstream
response, a validation error or a library exception can carry the question,
document text or a secret. FastAPI's default 422 body echoes the input (the
question itself), so validation errors are rewritten to field locations and
error kinds only.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from docquery.core.errors import (
    DocQueryError,
    EmbedderError,
    GeneratorError,
    GeneratorOverloaded,
    GeneratorUnavailable,
    VectorIndexError,
)

log = logging.getLogger("docquery.api")
_FIELD = re.compile(r"^[a-z_]{1,32}$")

_HTTP_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
}
_HTTP_MESSAGES = {
    400: "bad request",
    401: "missing or invalid credential",
    403: "the credential lacks the required role",
    404: "not found",
    405: "method not allowed",
    406: "not acceptable",
    409: "conflict",
    413: "request body too large",
    415: "unsupported media type",
    422: "invalid request body",
    429: "rate limit exceeded",
    500: "internal error",
    502: "upstream error",
    503: "service unavailable",
}


class ApiError(DocQueryError):
    """An error the API answers with directly; ``message`` must be a fixed, content-free string."""

    def __init__(
        self,
        status: int,
        message: str | None = None,
        *,
        type_: str | None = None,
        headers: Mapping[str, str] | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message or _HTTP_MESSAGES.get(status, "error"))
        self.status = status
        self.message = message or _HTTP_MESSAGES.get(status, "error")
        self.type = type_ or _HTTP_TYPES.get(status, "error")
        self.headers = dict(headers or {})
        # OpenAI's error shape adds these two; its SDKs read them (e.g. code "model_not_found").
        self.param = param
        self.code = code


def request_id_of(scope_or_request: Request | Mapping[str, Any]) -> str:
    scope = scope_or_request.scope if isinstance(scope_or_request, Request) else scope_or_request
    ctx = (scope.get("state") or {}).get("ctx")
    return str(getattr(ctx, "request_id", "")) if ctx is not None else ""


def envelope(
    status: int,
    message: str,
    request_id: str,
    *,
    type_: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    kind = type_ or _HTTP_TYPES.get(status, "error")
    error: dict[str, Any] = {"type": kind, "message": message, "request_id": request_id}
    if param is not None or code is not None:
        error.update(param=param, code=code)
    return {"error": error}


def error_response(request: Request | Mapping[str, Any], err: ApiError) -> JSONResponse:
    body = envelope(err.status, err.message, request_id_of(request), type_=err.type, param=err.param, code=err.code)
    return JSONResponse(body, status_code=err.status, headers=err.headers)


def retry_after_header(seconds: float | None, default: float = 1.0) -> dict[str, str]:
    value = default if seconds is None or seconds <= 0 else seconds
    return {"Retry-After": str(max(1, math.ceil(value)))}


def _overloaded(exc: BaseException) -> ApiError:
    wait = getattr(exc, "retry_after", None)
    return ApiError(
        503, "the language model is at capacity; retry later", type_="overloaded", headers=retry_after_header(wait)
    )


def _llm_down(exc: BaseException) -> ApiError:
    wait = getattr(exc, "retry_after", None)
    return ApiError(
        503,
        "the language model is unavailable or timed out",
        type_="llm_unavailable",
        headers=retry_after_header(wait, 2.0),
    )


# Most specific first. Unknown errors become a plain 500.
_TRANSLATIONS: tuple[tuple[type[BaseException], Callable[[BaseException], ApiError]], ...] = (
    (GeneratorOverloaded, _overloaded),
    (GeneratorUnavailable, _llm_down),
    (GeneratorError, lambda _: ApiError(502, "the language model returned an error", type_="llm_error")),
    (
        EmbedderError,
        lambda _: ApiError(
            503, "the embedder is unavailable", type_="embedder_unavailable", headers=retry_after_header(2)
        ),
    ),
    (
        VectorIndexError,
        lambda _: ApiError(
            503, "the vector index is unavailable", type_="index_unavailable", headers=retry_after_header(2)
        ),
    ),
)


def translate(exc: BaseException) -> ApiError:
    """Map a project error to its HTTP form. Unknown errors become a plain 500."""
    if isinstance(exc, ApiError):
        return exc
    for kind, make in _TRANSLATIONS:
        if isinstance(exc, kind):
            return make(exc)
    return ApiError(500, "internal error", type_="internal_error")


def _validation_message(exc: RequestValidationError) -> str:
    # Locations and error kinds only: pydantic's "input" and "msg" may quote the body.
    # Field names are shown only when they look like ours; an unknown key is the client's text.
    parts = []
    for err in exc.errors()[:10]:
        kind = str(err.get("type", "invalid"))
        if kind == "json_invalid":  # its location is an offset into the body, which says nothing to a client
            parts.append("the body is not valid JSON")
            continue
        path = [p for p in err.get("loc", ()) if p != "body"]
        if kind == "extra_forbidden":
            path = [*path[:-1], "<unknown field>"]
        loc = ".".join(str(p) if isinstance(p, int) or _FIELD.match(str(p)) else "<field>" for p in path) or "body"
        parts.append(f"{loc}: {kind}")
    return "invalid request: " + "; ".join(parts) if parts else "invalid request"


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    err = translate(exc)
    if err.status >= 500:
        # Type name only: the message of an unknown exception may carry content.
        log.error("request failed: %s -> %d", type(exc).__name__, err.status)
    return error_response(request, err)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    # Starlette's own detail strings are not used: only our fixed message per status.
    status = exc.status_code if isinstance(exc, StarletteHTTPException) else 500
    if status == 400 and isinstance(exc.__cause__, ValueError):
        # FastAPI's "error parsing the body" (bytes that are not UTF-8): an invalid body, as bad JSON is.
        return error_response(request, ApiError(422, "invalid request: the body is not valid JSON"))
    headers = dict(exc.headers or {}) if isinstance(exc, StarletteHTTPException) else {}
    return error_response(request, ApiError(status, headers=headers))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    message = _validation_message(exc) if isinstance(exc, RequestValidationError) else "invalid request"
    return error_response(request, ApiError(422, message))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(DocQueryError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
