"""The ACL no-leak property, for uploaded documents: random uploaders (groups, may_grant, roles) upload
documents with random ACLs, and random readers ask, search, list, read passages and ask for statuses.

An upload is accepted exactly when every group it gives is one the uploader may grant (public: admin);
what a reader gets back names no document, marker or group it may not see, and a status is shown only to
a document's readers and its uploader.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from docquery.core.collection import PUBLIC_GROUP
from tests.support.api_harness import Harness, JwtIssuer, bearer, make_harness
from tests.support.uploads import drain

GROUPS = ["eng", "hr", "fin", "legal"]
WORDS = ["policy", "salary", "leave", "budget", "contract", "security", "laptop", "travel"]
_counter = itertools.count()


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    unlimited = {"rate_limit_per_minute": 100_000, "rate_limit_burst": 100_000, "queue": 10_000}
    yield from make_harness(
        tmp_path_factory.mktemp("upload-acl"),
        jwks=jwt_issuer.jwks(),
        retrieval={"min_dense_score": -1.0, "top_k": 8},
        uploads=unlimited,
    )


def _marker(n: int) -> str:
    return "zqup" + "".join(chr(ord("a") + int(d)) for d in str(n)) + "x"


uploader = st.fixed_dictionaries(
    {
        "groups": st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
        "may_grant": st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
        "admin": st.booleans(),
    }
)
acl = st.one_of(st.just([PUBLIC_GROUP]), st.lists(st.sampled_from(GROUPS), min_size=1, max_size=3, unique=True))


def _visible(doc: tuple[str, ...], reader: set[str]) -> bool:
    return bool(reader) and (PUBLIC_GROUP in doc or bool(set(doc) & reader))


# Not vacuous: the first examples upload a document its reader sees, and one its uploader may not give.
@example(
    uploads=[({"groups": ["eng"], "may_grant": [], "admin": False}, ["eng"], ["policy", "leave"])],
    reader=["eng"],
    words=["policy"],
)
@example(
    uploads=[({"groups": ["eng"], "may_grant": ["fin"], "admin": False}, ["hr"], ["budget", "leave"])],
    reader=["hr"],
    words=["budget"],
)
@settings(max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    uploads=st.lists(st.tuples(uploader, acl, st.lists(st.sampled_from(WORDS), min_size=2, max_size=6)), max_size=3),
    reader=st.lists(st.sampled_from([*GROUPS, "nobody"]), max_size=3, unique=True),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
)
def test_uploads_grant_only_what_they_may_and_leak_nothing(
    h: Harness,
    jwt_issuer: JwtIssuer,
    uploads: list[tuple[dict[str, object], list[str], list[str]]],
    reader: list[str],
    words: list[str],
) -> None:
    docs: dict[str, tuple[tuple[str, ...], str, str]] = getattr(h, "uploaded", {})  # doc_id -> (acl, marker, sub)
    for who, groups, text in uploads:
        n = next(_counter)
        sub, marker = f"uploader-{n}", _marker(n)
        roles = ["ingest", "admin"] if who["admin"] else ["ingest"]
        token = jwt_issuer.token(sub=sub, groups=who["groups"], roles=roles, may_grant=who["may_grant"])
        field = {"public": "true"} if groups == [PUBLIC_GROUP] else {"groups": ",".join(groups)}
        body = " ".join([*text, marker]) + ".\n"
        r = h.client.post(
            "/v1/documents", headers=bearer(token), files={"files": (f"{marker}.txt", body.encode())}, data=field
        )
        grantable = set(who["groups"]) | set(who["may_grant"])  # type: ignore[arg-type]
        allowed = bool(who["admin"]) if groups == [PUBLIC_GROUP] else set(groups) <= grantable
        assert r.status_code == (202 if allowed else 403), r.text
        if allowed:
            docs[r.json()["documents"][0]["doc_id"]] = (tuple(groups), marker, f"jwt:{sub}")
    drain(h)
    h.uploaded = docs  # type: ignore[attr-defined]  # documents accumulate across examples

    mine = set(reader)
    visible = {d for d, (g, _, _) in docs.items() if _visible(g, mine)}
    hidden_markers = [m for d, (_, m, _) in docs.items() if d not in visible]
    auth = bearer(jwt_issuer.token(sub="reader", groups=reader, roles=["query"]))
    question = " ".join(words + [m for _, m, _ in list(docs.values())[:2]])

    bodies: list[str] = []
    r = h.client.post("/v1/search", json={"query": question, "top_k": 20}, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    cited = {c["doc_id"] for c in r.json()["citations"]}
    r = h.client.post("/v1/query", json={"question": question}, headers=auth)
    assert r.status_code == 200
    bodies.append(r.text)
    cited |= {c["doc_id"] for c in r.json()["citations"]}
    r = h.client.get("/v1/documents", params={"limit": 500}, headers=auth)
    bodies.append(r.text)
    listed = {d["doc_id"] for d in r.json()["documents"]}
    for doc_id, (_, _, sub) in docs.items():
        status = h.client.get(f"/v1/documents/{doc_id}", headers=auth)
        assert status.status_code == (200 if doc_id in visible else 404)
        bodies.append(status.text)
        passage = h.client.get(f"/v1/passages/{doc_id}/0", headers=auth)
        assert passage.status_code == (200 if doc_id in visible else 404)
        bodies.append(passage.text)
        # Its uploader always sees its status, whatever it granted.
        own = bearer(jwt_issuer.token(sub=sub.removeprefix("jwt:"), groups=[], roles=["ingest"]))
        assert h.client.get(f"/v1/documents/{doc_id}", headers=own).status_code == 200

    assert cited <= visible
    assert listed == visible
    for body in bodies:
        for marker in hidden_markers:
            assert marker not in body
        for group in GROUPS:
            assert f'"{group}"' not in body  # no response names an ACL label
