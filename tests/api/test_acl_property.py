"""ACL no-leak property: random principals, documents and queries, through every endpoint and the stream.

Each example ingests a few documents with random groups, each carrying a
unique marker word, then asks as a random principal (a signed JWT with random
groups) through /v1/query (JSON and SSE), /v1/search, /v1/chat/completions
(JSON and stream) and /v1/documents, and again with a conversation history
(``history``, earlier ``messages``) that names every document's marker and
the ACL groups, and reads every document's passage (/v1/passages). Nothing the principal may not read can
appear: no foreign doc id in citations or listings, no foreign marker in any
body. Documents accumulate across examples, so later examples run against a
bigger, mixed index. The relevance threshold is off, to let every ACL-visible
hit through.
"""

from __future__ import annotations

import itertools
import json
import string
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.core.collection import PUBLIC_GROUP
from tests.support.api_harness import Harness, JwtIssuer, bearer, make_harness
from tests.support.fakes import AsyncHashEmbedder, HashEmbedder

GROUPS = ["eng", "hr", "fin", "legal"]
WORDS = ["policy", "salary", "leave", "budget", "contract", "security", "laptop", "travel", "bonus", "audit"]
_counter = itertools.count()


@pytest.fixture(scope="module", params=["local", "remote"])
def acl_harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer
) -> Iterator[Harness]:
    """Both retrieval routes: embedding and search on a worker thread (a local embedder), and
    the embedding awaited with the Edge search called on the loop (a remote one)."""
    yield from make_harness(
        tmp_path_factory.mktemp("acl"),
        jwks=jwt_issuer.jwks(),
        embedder=AsyncHashEmbedder() if request.param == "remote" else HashEmbedder(),
        retrieval={"min_dense_score": -1.0, "top_k": 8},
    )


def _marker(n: int) -> str:
    # Letters only, so the hash embedder and BM25 treat it as one word.
    digits = []
    while True:
        n, r = divmod(n, 26)
        digits.append(string.ascii_lowercase[r])
        if n == 0:
            break
    return "zqmark" + "".join(digits) + "x"


doc_strategy = st.tuples(
    st.one_of(st.just([PUBLIC_GROUP]), st.lists(st.sampled_from(GROUPS), min_size=1, max_size=3, unique=True)),
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=8),
)


def _visible(doc_groups: tuple[str, ...], principal_groups: set[str]) -> bool:
    if not principal_groups:
        return False
    return PUBLIC_GROUP in doc_groups or bool(set(doc_groups) & principal_groups)


def _passages(h: Harness, auth: dict[str, str], visible: set[str], markers: dict[str, str]) -> list[str]:
    """The passage of every document: found exactly when visible; a hidden one is the same 404 as a missing one."""
    missing = h.client.get("/v1/passages/no-such-doc/0", headers=auth)
    found = []
    for doc_id in h.corpus.docs:
        r = h.client.get(f"/v1/passages/{doc_id}/0", headers=auth)
        if doc_id in visible:
            assert r.status_code == 200 and markers[doc_id] in r.json()["text"]
            found.append(r.text)
        else:
            assert r.status_code == missing.status_code == 404
            assert r.json()["error"]["message"] == missing.json()["error"]["message"]
    return found


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(doc_strategy, min_size=1, max_size=3),
    principal_groups=st.lists(st.sampled_from([*GROUPS, "nobody"]), max_size=3, unique=True),
    query_words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    probe_markers=st.integers(min_value=0, max_value=3),
    follow_up=st.sampled_from(["and that one?", "what about it", "tell me more", "policy"]),
)
def test_no_acl_leak_through_any_endpoint(  # noqa: PLR0917
    acl_harness: Harness,
    jwt_issuer: JwtIssuer,
    docs: list[tuple[list[str], list[str]]],
    principal_groups: list[str],
    query_words: list[str],
    probe_markers: int,
    follow_up: str,
) -> None:
    h = acl_harness
    markers: dict[str, str] = {}
    for groups, words in docs:
        n = next(_counter)
        doc_id, marker = f"doc-{n}", _marker(n)
        h.corpus.add(doc_id, [" ".join([*words, marker, "."])], groups)
        markers[doc_id] = marker
    all_markers = {d: _marker(int(d.split("-")[1])) for d in h.corpus.docs}
    mine = set(principal_groups)
    visible = {d for d, g in h.corpus.docs.items() if _visible(g, mine)}
    hidden_markers = [m for d, m in all_markers.items() if d not in visible]
    # The question may name the markers of random documents, visible or not.
    question = " ".join(query_words + list(markers.values())[:probe_markers])
    auth = bearer(jwt_issuer.token(groups=principal_groups, roles=["query"]))

    bodies: list[str] = []
    cited: list[str] = []

    r = h.client.post("/v1/query", json={"question": question}, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    cited += [c["doc_id"] for c in r.json()["citations"]]

    r = h.client.post("/v1/query", json={"question": question, "stream": True}, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    for line in r.text.splitlines():
        if line.startswith("data: ") and '"citations"' in line:
            cited += [c["doc_id"] for c in json.loads(line[6:])["citations"]]

    r = h.client.post("/v1/search", json={"query": question, "top_k": 20}, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    searched = [c["doc_id"] for c in r.json()["citations"]]
    cited += searched
    # Not vacuous: with the threshold off, a caller who may see something gets hits.
    assert bool(searched) == bool(visible)

    chat = {"model": "docquery", "messages": [{"role": "user", "content": question}]}
    r = h.client.post("/v1/chat/completions", json=chat, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    cited += [c["doc_id"] for c in r.json()["citations"]]

    r = h.client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)

    # History is caller text like the question: naming hidden documents or groups in it
    # widens nothing, on either endpoint (the follow-ups are joined to it in extractive mode).
    history = [
        {"role": "user", "content": " ".join([*query_words, *all_markers.values(), "acl_groups", *GROUPS])},
        {"role": "assistant", "content": "groups: " + " ".join(GROUPS) + " " + " ".join(all_markers.values())},
    ]
    for stream in (False, True):
        r = h.client.post("/v1/query", json={"question": follow_up, "history": history, "stream": stream}, headers=auth)
        assert r.status_code == 200
        bodies.append(r.text)
        if not stream:
            cited += [c["doc_id"] for c in r.json()["citations"]]
        messages = [*history, {"role": "user", "content": follow_up}]
        r = h.client.post("/v1/chat/completions", json={**chat, "messages": messages, "stream": stream}, headers=auth)
        assert r.status_code == 200
        bodies.append(r.text)
        if not stream:
            cited += [c["doc_id"] for c in r.json()["citations"]]

    r = h.client.get("/v1/documents", headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    listed = {d["doc_id"] for d in r.json()["documents"]}

    bodies += _passages(h, auth, visible, all_markers)

    assert set(cited) <= visible
    assert listed == visible  # exactly what the principal may see, no more and no less
    if not mine:
        assert not cited and not listed
    for body in bodies:
        for marker in hidden_markers:
            assert marker not in body
        for group in GROUPS:
            # Listings and citations never reveal ACL labels.
            assert f'"{group}"' not in body
