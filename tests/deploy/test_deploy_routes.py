"""The HTTPRoute's split: no write path reaches the query pods.

The Gateway's side is the Gateway API's matching (gateway_route.py, from the spec at
kubernetes-sigs/gateway-api v1.6.1); the service's side is the app's own route table
(docquery.api.routes) behind uvicorn, which percent-decodes the path before routing
(uvicorn 0.54 ``protocols/http/h11_impl.py:205``, ``httptools_impl.py:260``). A request the
Gateway's match misses (a percent-encoded path) still finds the query pods unable to write.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import deploy_support as ds
import gateway_route
import pytest
from deploy_support import Rendering
from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.routing import Match, Route

from docquery.api import routes
from docquery.api.routes import documents, openai_compat, query, ui_session, uploads

UPLOAD, QUERY = "docquery-upload", "docquery-query"
OVERLAYS = ["overlay-dev", "overlay-prod", "base"]
# What only the upload pods may run: they write the index, or read the ingestion API's jobs.
WRITES: set[Callable[..., Any]] = {uploads.upload, documents.delete_document, uploads.job_status}
# Every other route that is not a GET: a new one must be placed on one side or the other.
NOT_WRITES: set[Callable[..., Any]] = {
    query.query,
    query.search,
    openai_compat.chat_completions,
    ui_session.sign_in_with_key,
    ui_session.sign_out,
}
APP_ROUTES: list[Route] = [r for router in (*routes.ROUTERS, *routes.UI_ROUTERS) for r in router.routes]
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _route(r: Rendering) -> dict[str, Any]:
    return r.get("HTTPRoute", "docquery")


def service_endpoint(method: str, raw_path: str) -> Callable[..., Any] | None:
    """The endpoint the service runs for the request (None: 404, 405 or a slash redirect)."""
    scope = {"type": "http", "method": method, "path": unquote(raw_path), "root_path": ""}
    for r in APP_ROUTES:
        match, _ = r.matches(scope)
        if match == Match.FULL:
            return r.endpoint
    return None


def _instances(path: str) -> list[str]:
    """A route template with its parameters filled the way a client sends them."""
    return [re.sub(r"\{[^}]+\}", value, path) for value in ("0123456789abcdef0123456789abcdef", "a.txt")]


def test_the_route_is_one_the_api_server_admits(renderings: dict[str, Rendering]) -> None:
    for name in OVERLAYS:
        r = renderings[name]
        route = _route(r)
        assert gateway_route.schema_problems(route) == [], name
        assert route["spec"]["parentRefs"] == [{"name": "docquery", "namespace": "gateway-system"}]
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                ports = [p["port"] for p in r.get("Service", ref["name"])["spec"]["ports"]]
                assert ref["port"] in ports and ref["port"] == 8080, (name, ref)


def test_the_matching_rules_as_the_spec_states_them() -> None:
    """Guards the guard: the spec's own examples, and each precedence step."""
    assert [gateway_route.path_matches("PathPrefix", "/abc", p) for p in ("/abc", "/abc/", "/abc/def", "/abcd")] == [
        True,
        True,
        True,
        False,
    ]
    assert gateway_route.path_matches("PathPrefix", "/abc/", "/abc")  # a trailing "/" is ignored
    assert [gateway_route.path_matches("Exact", "/abc", p) for p in ("/abc", "/abc/", "/Abc", "/abcd")] == [
        True,
        False,
        False,
        False,
    ]

    def rule(name: str, *matches: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "matches": list(matches), "backendRefs": [{"name": name}]}

    route = {
        "spec": {
            "rules": [
                {"name": "default", "backendRefs": [{"name": "default"}]},
                rule("prefix", {"path": {"type": "PathPrefix", "value": "/a"}}),
                rule("longer", {"path": {"type": "PathPrefix", "value": "/a/b"}}),
                rule("method", {"path": {"type": "PathPrefix", "value": "/a"}, "method": "POST"}),
                rule("exact", {"path": {"type": "Exact", "value": "/a/b/c"}}),
                rule("later", {"path": {"type": "PathPrefix", "value": "/a"}}),
            ]
        }
    }

    def chosen(method: str, path: str) -> str:
        got = gateway_route.backend_for(route, method, path)
        assert got is not None
        return got.rule

    assert chosen("GET", "/x") == "default"
    assert chosen("GET", "/a/x") == "prefix"  # before "later": the first rule on a tie
    assert chosen("POST", "/a/x") == "method"
    assert chosen("POST", "/a/b/x") == "longer"  # a longer prefix before a method
    assert chosen("GET", "/a/b/c") == "exact"
    assert gateway_route.backend_for({"spec": {"rules": [rule("only", {"path": {"value": "/z"}})]}}, "GET", "/") is None


def test_every_route_of_the_service_lands_on_its_side(renderings: dict[str, Rendering]) -> None:
    seen_writes = set()
    for r in APP_ROUTES:
        for method in sorted(r.methods or ()):
            if method not in ("GET", "HEAD"):
                assert r.endpoint in WRITES | NOT_WRITES, f"{method} {r.path}: place it in WRITES or NOT_WRITES"
            for path in _instances(r.path):
                if service_endpoint(method, path) is not r.endpoint:
                    continue  # the value does not fit this route's parameter
                want = UPLOAD if r.endpoint in WRITES else QUERY
                seen_writes |= {r.endpoint} & WRITES
                for name in OVERLAYS:
                    got = gateway_route.backend_for(_route(renderings[name]), method, path)
                    assert got is not None and got.backends == (want,), (name, method, path, got)
    assert seen_writes == WRITES


_SEGMENTS = st.sampled_from(
    [
        *("v1", "documents", "ingest", "jobs", "query", "search", "ui", "admin", "quarantine", "passages", "chat"),
        *("completions", "0123456789abcdef0123456789abcdef", "a.txt", "", ".", "..", "Documents", "V1"),
    ]
)


def _encode(path: str, which: list[bool]) -> str:
    """Percent-encodes the letters and inner slashes ``which`` picks: the same path to the service, another to a
    Gateway."""
    picks = [False, *which, *[False] * len(path)][: len(path)]  # the leading "/" stays
    return "".join(
        f"%{ord(c):02X}" if (c.isalpha() or c == "/") and pick else c for c, pick in zip(path, picks, strict=True)
    )


@settings(max_examples=400, deadline=None)
@example(method="DELETE", segments=["v1", "documents", "a.txt"], trailing=False, encode=[])
@example(method="POST", segments=["v1", "documents"], trailing=False, encode=[False, False, False, True])
@given(
    method=st.sampled_from([*METHODS, "post", "delete", "Post"]),
    segments=st.lists(_SEGMENTS, min_size=1, max_size=5),
    trailing=st.booleans(),
    encode=st.lists(st.booleans(), max_size=40),
)
def test_no_generated_request_writes_through_the_query_pods(
    renderings: dict[str, Rendering], method: str, segments: list[str], trailing: bool, encode: list[bool]
) -> None:
    path = "/" + "/".join(segments) + ("/" if trailing else "")
    for raw in {path, _encode(path, encode)}:
        endpoint = service_endpoint(method, raw)
        for name in ("overlay-dev", "overlay-prod"):
            r = renderings[name]
            got = gateway_route.backend_for(_route(r), method, raw)
            assert got is not None  # the query rule has no match: it takes what nothing else does
            if got.backends == (UPLOAD,):
                assert endpoint is None or endpoint in WRITES, (name, method, raw)  # the upload pods serve writes only
            elif endpoint in WRITES:
                # Only a path the Gateway saw encoded gets here; the query pods cannot act on it.
                assert "%" in raw, (name, method, raw)
                assert query_pods_cannot_write(r), name


def query_pods_cannot_write(r: Rendering) -> bool:
    """Uploads off (POST /v1/documents answers 503) and only Qdrant's read-only key (a delete is refused)."""
    d = r.get("Deployment", QUERY)
    c = d["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    key = d["spec"]["template"]["metadata"]["annotations"]["vault.hashicorp.com/agent-inject-secret-qdrant-api-key"]
    return env.get("DOCQUERY_UPLOADS__ENABLED") == "false" and key.endswith("/qdrant-read-only-key")


@pytest.mark.parametrize("name", ["overlay-dev", "overlay-prod"])
def test_a_percent_encoded_write_meets_read_only_query_pods(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    for method, raw in (
        ("POST", "/v1/%64ocuments"),
        ("DELETE", "/v1/document%73/a.txt"),
        ("DELETE", "/v1/documents%2Fa"),
    ):
        assert service_endpoint(method, raw) in WRITES
        got = gateway_route.backend_for(_route(r), method, raw)
        assert got is not None and got.backends == (QUERY,)
    assert query_pods_cannot_write(r)
    assert r.get("HTTPRoute", "docquery")["metadata"]["namespace"] == ds.NAMESPACE
