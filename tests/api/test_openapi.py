"""The OpenAPI document says what the server does: auth, error bodies and limits.

The limits are read from the served schema, not from settings, and each one is
sent at its maximum (accepted) and one past it (422): a schema that drifts from
the server fails here. The app runs with non-default bounds so a schema that
shows the models' hard ceilings (or the defaults) fails too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import swagger_ui_bundle  # type: ignore[import-untyped]

from docquery.api.app import create_app
from docquery.api.openai_schemas import ChatCompletion
from docquery.api.schemas import ErrorEnvelope
from docquery.config.settings import Settings
from tests.support.api_harness import Harness, bearer, write_api_keys
from tests.support.fixtures import VACATION, harness_fixture

AUTH = bearer("tok-root-admin")
BOUNDS = {
    "api": {"max_question_chars": 300},
    "retrieval": {"max_top_k": 7, "min_dense_score": 0.2},
    "conversation": {"max_history_turns": 3, "max_history_chars": 500},
}


h = harness_fixture(VACATION, **BOUNDS)


@pytest.fixture(scope="module")
def schema(h: Harness) -> dict[str, Any]:
    r = h.client.get("/openapi.json")
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


def _props(schema: dict[str, Any], model: str) -> dict[str, Any]:
    props: dict[str, Any] = schema["components"]["schemas"][model]["properties"]
    return props


def _int_bound(field: dict[str, Any], key: str) -> int:
    for option in field.get("anyOf", [field]):
        if key in option:
            return int(option[key])
    raise AssertionError(f"no {key} in {field}")


def _operations(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in schema["paths"].items():
        for method, op in item.items():
            yield path, method, op


def test_security_schemes_are_the_credentials_the_server_takes(schema: dict[str, Any]) -> None:
    schemes = schema["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "http", "scheme": "bearer"}
    assert schemes["oidc"]["bearerFormat"] == "JWT"
    for path, method, op in _operations(schema):
        expected = [{"apiKey": []}, {"oidc": []}] if path.startswith("/v1/") else None
        assert op.get("security") == expected, (method, path)


def test_every_error_is_the_envelope_never_fastapis_detail(schema: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    for path, method, op in _operations(schema):
        for status, response in op["responses"].items():
            if int(status) >= 400 and path != "/readyz":
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/ErrorEnvelope", (method, path, status)
        if path.startswith("/v1/"):
            assert {"401", "403", "429", "503"} <= set(op["responses"]), (method, path)
        if "requestBody" in op:
            assert {"413", "422"} <= set(op["responses"]), (method, path)
        for status in ("429", "503"):
            if status in op["responses"]:
                assert "Retry-After" in op["responses"][status]["headers"]


def test_documented_statuses_are_what_the_server_answers(h: Harness, schema: dict[str, Any]) -> None:
    """Each /v1 operation: 401 without a credential, 403 without the role, 422 on a bad body,
    413 past the body limit; each body is the documented envelope."""
    bodies = {"/v1/query": {"question": "x"}, "/v1/search": {"query": "x"}, "/v1/chat/completions": {"messages": []}}
    seen = 0
    for path, method, op in _operations(schema):
        if not path.startswith("/v1/"):
            continue
        url = path.replace("{doc_id}", "nope").replace("{model_id}", "docquery").replace("{chunk_index}", "0")
        url = url.replace("{job_id}", "0" * 32)
        checks: list[tuple[dict[str, str], Any, int]] = [
            ({}, bodies.get(path), 401),
            (bearer("tok-norole"), bodies.get(path), 403),
        ]
        # The upload's multipart body and its bounds: tests/api/test_uploads.py and test_upload_hostile.py.
        if "requestBody" in op and (method, path) != ("post", "/v1/documents"):
            checks.append((AUTH, {"unknown": 1} if path != "/v1/chat/completions" else {"messages": []}, 422))
            checks.append((AUTH, {"question": "x" * 70_000}, 413))
        if method == "delete" or path.startswith("/v1/admin/"):
            checks.append((bearer("tok-alice-eng"), None, 403))  # a caller with the query role alone
        for headers, body, status in checks:
            r = h.client.request(method.upper(), url, headers=headers, json=body)
            assert r.status_code == status, (method, path, r.status_code)
            assert str(status) in op["responses"], (method, path, status)
            assert ErrorEnvelope.model_validate(r.json()).error.request_id
            seen += 1
    assert seen == 32


@pytest.mark.parametrize(
    "case",
    [("QueryRequest", "question", "/v1/query"), ("SearchRequest", "query", "/v1/search")],
    ids=lambda c: c[2],
)
def test_text_max_length_is_the_servers(h: Harness, schema: dict[str, Any], case: tuple[str, str, str]) -> None:
    model, field, path = case

    def body(text: str) -> dict[str, str]:
        return {field: text}

    limit = _props(schema, model)[field]["maxLength"]
    assert limit == 300
    for text in ("q" * limit, " " * (limit - 1) + "q", "vacation " * (limit // 9)):
        assert h.client.post(path, json=body(text), headers=AUTH).status_code == 200
    for text in ("q" * (limit + 1), "q" * limit + " ", " " + "q" * limit):
        r = h.client.post(path, json=body(text), headers=AUTH)
        assert r.status_code == 422 and f"{field}: longer than {limit}" in r.json()["error"]["message"]
    assert h.client.post(path, json=body(" \t\n"), headers=AUTH).status_code == 422  # pattern \S


@pytest.mark.parametrize(
    ("model", "path", "key"), [("QueryRequest", "/v1/query", "question"), ("SearchRequest", "/v1/search", "query")]
)
def test_top_k_bounds_are_the_servers(h: Harness, schema: dict[str, Any], model: str, path: str, key: str) -> None:
    field = _props(schema, model)["top_k"]
    high, low = _int_bound(field, "maximum"), _int_bound(field, "minimum")
    assert (low, high) == (1, 7)
    for k in (low, high):
        assert h.client.post(path, json={key: "vacation", "top_k": k}, headers=AUTH).status_code == 200
    for k in (low - 1, high + 1, -5, 10**6):
        assert h.client.post(path, json={key: "vacation", "top_k": k}, headers=AUTH).status_code == 422


def test_history_bounds_are_the_servers(h: Harness, schema: dict[str, Any]) -> None:
    turns_max = _props(schema, "QueryRequest")["history"]["maxItems"]
    chars_max = _props(schema, "HistoryTurn")["content"]["maxLength"]
    assert (turns_max, chars_max) == (3, 500)

    def ask(history: list[dict[str, str]]) -> int:
        body = {"question": "vacation", "history": history}
        return int(h.client.post("/v1/query", json=body, headers=AUTH).status_code)

    turn = {"role": "user", "content": "days"}
    assert ask([turn] * turns_max) == 200
    assert ask([turn] * (turns_max + 1)) == 422
    assert ask([{"role": "user", "content": "d" * chars_max}]) == 200
    assert ask([{"role": "user", "content": "d" * (chars_max + 1)}]) == 422


@pytest.mark.parametrize("path", ["/v1/documents", "/v1/admin/quarantine"])
def test_listing_limit_is_the_servers(h: Harness, schema: dict[str, Any], path: str) -> None:
    params = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
    high = _int_bound(params["limit"]["schema"], "maximum")
    assert {"limit", "cursor"} <= set(params)
    assert h.client.get(path, params={"limit": high}, headers=AUTH).status_code == 200
    for bad in (0, high + 1):
        assert h.client.get(path, params={"limit": bad}, headers=AUTH).status_code == 422


def test_chat_200_is_typed_and_the_body_matches(h: Harness, schema: dict[str, Any]) -> None:
    ok = schema["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert ok["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatCompletion"}
    assert ok["text/event-stream"]["schema"] == {"$ref": "#/components/schemas/ChatCompletionChunk"}
    assert {"usage", "choices", "citations"} <= set(_props(schema, "ChatCompletion"))
    body = {"model": "docquery", "messages": [{"role": "user", "content": "vacation days"}]}
    r = h.client.post("/v1/chat/completions", json=body, headers=AUTH)
    assert r.status_code == 200
    ChatCompletion.model_validate(r.json())


class _Refs(HTMLParser):
    """Every URL a page makes the browser fetch: src and href attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def test_the_docs_page_loads_nothing_from_elsewhere(h: Harness, schema: dict[str, Any]) -> None:
    # Air-gapped: Swagger UI from the swagger-ui-bundle package, served by the app itself.
    r = h.client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    refs = _Refs()
    refs.feed(r.text)
    assert sorted(refs.urls) == ["/docs/assets/favicon-32x32.png", "/docs/assets/swagger-ui-bundle.js",
                                 "/docs/assets/swagger-ui.css"]  # fmt: skip
    bundle = Path(str(swagger_ui_bundle.swagger_ui_path))
    for url in refs.urls:
        asset = h.client.get(url)
        assert asset.status_code == 200 and asset.content == (bundle / url.rsplit("/", 1)[1]).read_bytes(), url
    assert h.client.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"].startswith("text/javascript")
    assert "http://" not in r.text and "https://" not in r.text  # no absolute URL at all in the page
    assert "url: '/openapi.json'" in r.text  # the schema from this app
    assert '"validatorUrl": null' in r.text  # Swagger UI's default validator is validator.swagger.io
    # Only the three files the page needs; not the package's demo page, which loads a public schema.
    for path in ("/redoc", "/docs/assets/index.html", "/docs/assets/swagger-initializer.js", "/docs/assets/../x"):
        assert h.client.get(path).status_code == 404, path
    assert "cdn" not in json.dumps(schema).lower()


def test_prod_serves_neither_the_schema_nor_the_page(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    write_api_keys(secrets, {"tok-x": ("x", ["eng"], ["query"])})
    app = create_app(Settings(profile="prod", data_dir=tmp_path / "d", secrets_dir=secrets))
    paths = {getattr(route, "path", "") for route in app.routes}
    assert not {p for p in paths if p.startswith(("/docs", "/openapi", "/redoc"))}
