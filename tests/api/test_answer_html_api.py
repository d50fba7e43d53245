"""``answer_html`` through the service: on the JSON answer and the stream's ``done`` event, the same HTML,
inert whatever the stand-in LLM writes (split across stream chunks at awkward places)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from docquery.api.answer_html import AnswerHtml
from tests.api.test_sanitize import EXFIL_SCRIPTS
from tests.support.api_harness import Harness, JwtIssuer, bearer, llm_generator, make_harness, sse_events
from tests.support.standins.openai_server import StandInOpenAIServer
from tests.unit.test_answer_html import ALLOWED, assert_inert

pytestmark = pytest.mark.filterwarnings("ignore::bs4.MarkupResemblesLocatorWarning")
HOSTILE_REPLIES = {
    **EXFIL_SCRIPTS,
    "script": ["25 days [S1]. <scr", "ipt>window.__pwned=1</script>"],
    "svg": ["<svg onl", "oad=alert(1)>", "x</svg> [S1]"],
    "fence": ["```html\n<img src=x one", "rror=alert(1)>\n```\n"],
    "allowed": ["See [the guide](https://docs.exa", "mple.com/leave) [S1]."],
}


@pytest.fixture(scope="module")
def html_harness(
    tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer, server: StandInOpenAIServer
) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("answer-html")
    settings = {"api": {"link_allowlist": list(ALLOWED)}}
    for h in make_harness(tmp, generator=llm_generator(server), jwks=jwt_issuer.jwks(), **settings):
        h.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        yield h


@pytest.mark.parametrize("script", sorted(HOSTILE_REPLIES))
def test_answer_html_is_inert_and_the_same_in_json_and_stream(
    html_harness: Harness, server: StandInOpenAIServer, script: str
) -> None:
    server.config.reply = HOSTILE_REPLIES[script]
    q, auth = {"question": "how many vacation days"}, bearer("tok-alice-eng")

    one = html_harness.client.post("/v1/query", json=q, headers=auth).json()
    assert_inert(one["answer_html"])
    assert one["answer_html"] == AnswerHtml(ALLOWED)(one["answer"])

    events = sse_events(html_harness.client.post("/v1/query", json={**q, "stream": True}, headers=auth).text)
    done = [d for e, d in events if e == "done"]
    # The stream's answer is the deltas joined (split where the LLM split it), rendered once at the end.
    streamed = "".join(d["text"] for e, d in events if e == "delta")
    assert len(done) == 1 and done[0]["answer_html"] == AnswerHtml(ALLOWED)(streamed)
    assert_inert(done[0]["answer_html"])
    if script == "allowed":
        assert 'href="https://docs.example.com/leave"' in one["answer_html"]


def test_a_refusal_carries_answer_html_too(html_harness: Harness) -> None:
    auth = bearer("tok-bob-hr")  # hr sees nothing here: the refusal path
    one = html_harness.client.post("/v1/query", json={"question": "vacation days"}, headers=auth).json()
    assert one["answer_html"].startswith("<p>") and one["answer"] in one["answer_html"]
    events = sse_events(
        html_harness.client.post("/v1/query", json={"question": "vacation days", "stream": True}, headers=auth).text
    )
    assert next(d for e, d in events if e == "done")["answer_html"] == one["answer_html"]
