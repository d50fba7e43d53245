"""The OpenAPI document, made to say exactly what the server does.

FastAPI's generated schema knows neither the credential check (one dependency,
not a security class), nor the error envelope (its 422 is ``{"detail": ...}``),
nor the configured limits (the models carry hard ceilings; the settings are
checked in the routes). This module adds all three, per app, from its settings:
a client generated from the schema then gets what the server enforces.
tests/api/test_openapi.py sends each documented maximum, and one more.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from docquery.api.openai_schemas import ChatCompletionChunk
from docquery.api.schemas import ErrorEnvelope
from docquery.config.settings import Settings

_ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}

_SECURITY_SCHEMES = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "A DocQuery API key (`Authorization: Bearer <key>`); the server keeps only its SHA-256.",
    },
    "oidc": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An OIDC access token, checked against the configured JWKS, issuer and audience.",
    },
}

# Status -> (description, carries Retry-After). Which operations get which is decided in _errors_for.
_ERRORS: dict[int, tuple[str, bool]] = {
    400: ("Malformed request (e.g. an invalid Content-Length).", False),
    401: ("Missing or invalid credential (WWW-Authenticate: Bearer).", False),
    403: ("Valid credential without the required role.", False),
    404: ("Not found, or not visible to this caller.", False),
    409: ("The document is still being processed (uploaded again, or deleted, while it is indexed).", False),
    413: ("Request body larger than api.max_body_bytes.", False),
    422: ("Invalid request: the message names the field and the bound, never the value.", False),
    429: ("Rate limited (per principal, or failed authentications per address).", True),
    500: ("Internal error; the request id identifies it in the logs.", False),
    502: ("The language model returned an error.", False),
    503: ("Starting, overloaded, or a dependency (index, embedder, language model) unavailable.", True),
}
_GENERATING = {"/v1/query", "/v1/chat/completions"}
_HAS_404 = {"/v1/documents/{doc_id}", "/v1/models/{model_id}", "/v1/ingest/jobs/{job_id}"}
_UPLOAD = "/v1/documents"


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Replace ``app.openapi`` with a builder that documents auth, errors and limits."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=_DESCRIPTION, routes=app.routes)
            _components(schema)
            for path, item in schema.get("paths", {}).items():
                for operation in item.values():
                    _document_operation(path, operation)
            apply_limits(schema, settings)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]


def _components(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    # FastAPI's validation-error shapes are never sent: every 422 is the envelope.
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    for model in (ErrorEnvelope, ChatCompletionChunk):
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in body.pop("$defs", {}).items():
            schemas.setdefault(name, sub)
        schemas[model.__name__] = body
    components["securitySchemes"] = _SECURITY_SCHEMES


def _document_operation(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)
    for status in _errors_for(path, operation):
        description, retry = _ERRORS[status]
        entry: dict[str, Any] = {"description": description, "content": {"application/json": {"schema": _ENVELOPE}}}
        if retry:
            entry["headers"] = _RETRY_AFTER
        responses[str(status)] = entry
    if path.startswith("/v1/"):
        operation["security"] = [{"apiKey": []}, {"oidc": []}]


def _errors_for(path: str, operation: dict[str, Any]) -> list[int]:
    if not path.startswith("/v1/"):
        return [503] if path == "/readyz" else []
    statuses = [401, 403, 429, 500, 503]
    if "requestBody" in operation:
        statuses += [400, 413, 422]
        if path == _UPLOAD:
            statuses.append(409)
    if path == "/v1/documents/{doc_id}" and operation.get("operationId", "").startswith("delete"):
        statuses.append(409)
    elif operation.get("parameters"):
        statuses.append(422)
    if path in _HAS_404:
        statuses.append(404)
    if path in _GENERATING:
        statuses.append(502)
    return sorted(set(statuses))


def apply_limits(schema: dict[str, Any], settings: Settings) -> None:
    """Write the configured bounds over the models' hard ceilings."""
    props = _properties(schema)
    question, top_k = settings.api.max_question_chars, settings.retrieval.max_top_k
    for model, field in (("QueryRequest", "question"), ("SearchRequest", "query")):
        # pattern: a blank (whitespace-only) question is a 422 too.
        props[model][field].update(maxLength=question, minLength=1, pattern=r"\S")
    for model, default in (("QueryRequest", settings.retrieval.top_k), ("SearchRequest", 10)):
        field = props[model]["top_k"]
        for option in field.get("anyOf", [field]):
            if option.get("type") == "integer":
                option.update(minimum=1, maximum=top_k)
        field["description"] = f"Passages to retrieve, 1 to {top_k} (default {min(default, top_k)})."
    history = props["QueryRequest"]["history"]
    history["maxItems"] = settings.conversation.max_history_turns
    # One turn may use the whole character budget; all turns together may not exceed it either.
    props["HistoryTurn"]["content"]["maxLength"] = settings.conversation.max_history_chars
    history["description"] = (
        f"{history.get('description', '')} At most {settings.conversation.max_history_turns} turns and "
        f"{settings.conversation.max_history_chars} characters in all."
    ).strip()


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        name: body.get("properties", {})
        for name, body in schema.get("components", {}).get("schemas", {}).items()
        if isinstance(body, dict)
    }


_DESCRIPTION = (
    "Question answering over access-controlled documents. Every `/v1` call needs "
    "`Authorization: Bearer <API key or OIDC token>`; what it returns is limited to the documents the "
    'caller\'s groups may see. Every error body is `{"error": {"type", "message", "request_id"}}`.'
)
