"""Code goes out as code on every output path: JSON, stream, the chat facade (JSON and stream).

The chunker stores code as fenced blocks; an extractive answer quotes such a block, and an LLM
answer writes one (split across stream chunks at awkward places). Every path must deliver code
that each renderer of the matrix shows as a code block holding every line as written: a ``>>>``
prompt is not a quote, brackets carry no backslash, and line breaks survive.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from tests.support.api_harness import (
    Harness,
    JwtIssuer,
    bearer,
    chat_stream_text,
    llm_generator,
    make_harness,
    sse_events,
)
from tests.support.markdown_oracle import renderings, violations
from tests.support.standins.openai_server import StandInOpenAIServer

AUTH = bearer("tok-alice-eng")
CODE = (
    '>>> subprocess.run(["ls", "-l"], capture_output=True)\nCompletedProcess(args=[\'ls\'], returncode=0)\n\n>>> x[0]'
)
PASSAGE = f"Run commands with subprocess and capture their output.\n\n```pycon\n{CODE}\n```"
QUESTION = "How do I run ls with subprocess capture_output?"


def _answers(h: Harness) -> dict[str, str]:
    q = {"question": QUESTION}
    out = {"json": h.client.post("/v1/query", json=q, headers=AUTH).json()["answer"]}
    events = sse_events(h.client.post("/v1/query", json={**q, "stream": True}, headers=AUTH).text)
    out["stream"] = "".join(d["text"] for e, d in events if e == "delta")
    chat = {"model": "docquery", "messages": [{"role": "user", "content": QUESTION}]}
    out["chat"] = h.client.post("/v1/chat/completions", json=chat, headers=AUTH).json()["choices"][0]["message"][
        "content"
    ]
    out["chat-stream"] = chat_stream_text(
        h.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=AUTH).text
    )[0]
    return out


def _assert_code_kept(answer: str) -> None:
    assert not violations(answer)
    for name, html in renderings(answer).items():
        blocks = [pre.get_text().rstrip("\n") for pre in BeautifulSoup(html, "html.parser").find_all("pre")]
        lines = [[line.split() for line in b.split("\n")] for b in blocks]
        assert [line.split() for line in CODE.split("\n")] in lines, (name, answer, blocks)
        assert "<blockquote>" not in html, name  # the prompt is not a quote


@pytest.fixture(scope="module")
def extractive(tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("code-ex")
    for h in make_harness(tmp, jwks=jwt_issuer.jwks(), retrieval={"min_dense_score": -1.0}):
        h.corpus.add("sub", [PASSAGE], ["eng"])
        yield h


@pytest.fixture(scope="module")
def generative(
    tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer, server: StandInOpenAIServer
) -> Iterator[Harness]:
    tmp: Path = tmp_path_factory.mktemp("code-llm")
    for h in make_harness(tmp, generator=llm_generator(server), jwks=jwt_issuer.jwks()):
        h.corpus.add("sub", [PASSAGE], ["eng"])
        yield h


def test_an_extractive_answer_quotes_code_as_code_on_every_path(extractive: Harness) -> None:
    for path, answer in _answers(extractive).items():
        assert "\\[" not in answer and "> > >" not in answer, path
        _assert_code_kept(answer)


@pytest.mark.parametrize("cut", [1, 3, 7, 11])
def test_an_llm_answer_keeps_its_code_on_every_path(generative: Harness, server: StandInOpenAIServer, cut: int) -> None:
    reply = f"Use subprocess [S1]:\n\n```python\n{CODE}\n```\n\nThat is all."
    server.config.reply = [reply[i : i + cut] for i in range(0, len(reply), cut)]
    for path, answer in _answers(generative).items():
        _assert_code_kept(answer)
        assert "That is all." in answer, path


def test_an_llm_prompt_outside_a_fence_is_code(generative: Harness, server: StandInOpenAIServer) -> None:
    server.config.reply = ["Try it [S1]:\n\n", ">>> x = [1]\n", ">>> print(x)\n"]
    for path, answer in _answers(generative).items():
        assert not violations(answer)
        for name, html in renderings(answer).items():
            assert "<blockquote>" not in html and "&gt;&gt;&gt; x = [1]" in html, (path, name, answer)
