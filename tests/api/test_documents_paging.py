"""``GET /v1/documents`` pages (limit + opaque cursor) and each document's ingest state."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.core.collection import list_key
from tests.support.api_harness import Harness, bearer
from tests.support.fixtures import harness_fixture

ENG = bearer("tok-alice-eng")
HR = bearer("tok-bob-hr")
ENG_DOCS = sorted((f"eng-{i:02d}" for i in range(23)), key=lambda d: (list_key(d), d))  # the listing order
HR_DOCS = sorted((f"hr-{i:02d}" for i in range(5)), key=lambda d: (list_key(d), d))


def _mark_one_pending(harness: Harness) -> None:
    index = harness.components.index
    record = index.get_document("eng-05")
    assert record is not None
    index.put_document(replace(record, status="pending"))


h = harness_fixture(
    *((doc, f"text of {doc}", "eng") for doc in ENG_DOCS),
    *((doc, f"text of {doc}", "hr") for doc in HR_DOCS),
    prepare=_mark_one_pending,
)


def _walk(h: Harness, auth: dict[str, str], limit: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(100):
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        r = h.client.get("/v1/documents", params=params, headers=auth)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["documents"]) <= limit
        docs += page["documents"]
        cursor = page["next_cursor"]
        if cursor is None:
            return docs
    raise AssertionError("paging did not end")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(limit=st.integers(min_value=1, max_value=30))
def test_pages_cover_every_visible_document_once_in_order(h: Harness, limit: int) -> None:
    ids = [d["doc_id"] for d in _walk(h, ENG, limit)]
    assert ids == ENG_DOCS  # each once, in listing order, none of hr's
    assert [d["doc_id"] for d in _walk(h, HR, limit)] == HR_DOCS


def test_default_page_and_last_page(h: Harness) -> None:
    page = h.client.get("/v1/documents", headers=ENG).json()
    assert len(page["documents"]) == len(ENG_DOCS) and page["next_cursor"] is None


def test_each_document_has_its_ingest_state(h: Harness) -> None:
    states = {d["doc_id"]: d["status"] for d in _walk(h, ENG, 50)}
    assert states.pop("eng-05") == "pending"
    assert set(states.values()) == {"indexed"}


def _refusal(h: Harness, cursor: str, auth: dict[str, str]) -> tuple[int, dict[str, Any]]:
    r = h.client.get("/v1/documents", params={"cursor": cursor, "limit": 2}, headers=auth)
    error = dict(r.json()["error"])
    error.pop("request_id")
    return r.status_code, error


def test_a_cursor_is_the_callers_alone_and_forgeries_read_as_garbage(h: Harness) -> None:
    own = h.client.get("/v1/documents", params={"limit": 2}, headers=ENG).json()["next_cursor"]
    assert own and own.encode() != base64.urlsafe_b64encode(ENG_DOCS[1].encode()).rstrip(b"=")  # not the doc_id
    garbage = _refusal(h, "x" * len(own), ENG)
    assert garbage[0] == 422 and "cursor" in garbage[1]["message"]
    # Another principal replaying it, a cursor made from a doc_id (the old format), one character changed.
    forged = base64.urlsafe_b64encode(b"hr-00").decode().rstrip("=")
    changed = own[:10] + ("A" if own[10] != "A" else "B") + own[11:]
    for cursor, auth in [(own, HR), (own, bearer("tok-root-admin")), (forged, ENG), (changed, ENG)]:
        assert _refusal(h, cursor, auth) == garbage
    assert h.client.get("/v1/documents", params={"cursor": own}, headers=ENG).status_code == 200


@pytest.mark.parametrize(
    "cursor",
    ["", "not base64!", "a b", "%%%", "////", "=" * 8, "++", "ä", "A", "x" * 2000, "wyg", "/w"],
)
def test_a_bad_cursor_is_a_422(h: Harness, cursor: str) -> None:
    r = h.client.get("/v1/documents", params={"cursor": cursor}, headers=ENG)
    assert r.status_code == 422, (cursor, r.status_code)
    error = r.json()["error"]
    assert error["type"] == "invalid_request" and "cursor" in error["message"]
    if len(cursor) > 3:
        assert cursor not in error["message"]  # the client's text is not echoed


@pytest.mark.parametrize("limit", ["0", "-1", "501", "1e3", "abc", "", "10.5", "99999999999999999999"])
def test_limit_out_of_bounds_is_a_422(h: Harness, limit: str) -> None:
    r = h.client.get(f"/v1/documents?limit={limit}", headers=ENG)
    assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_request"
