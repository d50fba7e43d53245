"""The quarantine listing reads one engine scroll per page, in point-id order, on both engines.

A walk lists every quarantined chunk the caller's groups may see exactly once, never a searchable
chunk, another group's, a document record or the meta point, and never decrypts a chunk's text.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.core.collection import chunk_point_id
from docquery.core.domain import AclFilter, Chunk, DocumentRecord, IndexedChunk
from docquery.index import QdrantIndex
from tests.integration.conftest import INDEX_DIM, IndexOpener

_names = itertools.count()
GROUPS = ("eng", "hr")


class _SealedText:
    """Encrypts at rest; a read that decrypts fails the test."""

    def encrypt(self, plaintext: str, *, aad: str = "") -> str:
        return "sealed:" + plaintext[::-1]

    def decrypt(self, token: str, *, aad: str = "") -> str:
        raise AssertionError("the quarantine listing decrypted a chunk's text")


def _item(doc_id: str, i: int, groups: tuple[str, ...], *, held: bool) -> IndexedChunk:
    chunk = Chunk(
        id=chunk_point_id(doc_id, f"sha-{doc_id}", i),
        doc_id=doc_id,
        source=f"/c/{doc_id}.md",
        title=doc_id,
        chunk_index=i,
        text=f"text {doc_id} {i}",
        content_sha256=f"sha-{doc_id}",
        acl_groups=groups,
        page=f"H {i}",
        flags=("injection:rule",) if held else (),
    )
    return IndexedChunk(chunk=chunk, dense=[1.0] + [0.0] * (INDEX_DIM - 1), quarantined=held)


def _fill(index: QdrantIndex, docs: list[tuple[int, int, int]]) -> dict[str, set[tuple[str, int]]]:
    """Per doc (group, held, clean) chunks; returns each group's held (doc_id, chunk_index)."""
    held: dict[str, set[tuple[str, int]]] = {g: set() for g in GROUPS}
    items = []
    for n, (group, n_held, n_clean) in enumerate(docs):
        doc_id, groups = f"d{n}", (GROUPS[group],)
        for i in range(n_held + n_clean):
            items.append(_item(doc_id, i, groups, held=i < n_held))
            if i < n_held:
                held[GROUPS[group]].add((doc_id, i))
        index.put_document(
            DocumentRecord(doc_id, f"/c/{doc_id}.md", "/c", "0" * 64, n_held + n_clean, groups, title=doc_id)
        )
    if items:
        index.upsert(items)
    return held


def _walk(index: QdrantIndex, acl: AclFilter, limit: int, doc_id: str | None = None) -> list[tuple[str, int, str]]:
    out: list[tuple[str, int, str]] = []
    after: str | None = None
    for _ in range(10_000):
        page, after = index.list_quarantined(acl=acl, after=after, limit=limit, doc_id=doc_id)
        assert len(page) <= limit
        out += [(q.doc_id, q.chunk_index, q.id) for q in page]
        if after is None:
            return out
    raise AssertionError("the walk did not end")


docs_strategy = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 9), st.integers(0, 3)), max_size=8)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=docs_strategy, limit=st.integers(1, 12))
def test_a_walk_lists_every_held_chunk_the_caller_may_see_once(
    opener: IndexOpener, docs: list[tuple[int, int, int]], limit: int
) -> None:
    index = opener(f"q{next(_names)}")
    index.set_cipher(_SealedText())
    held = _fill(index, docs)
    for group in GROUPS:
        walked = _walk(index, AclFilter.for_groups({group}), limit)
        assert sorted((d, i) for d, i, _ in walked) == sorted(held[group])  # once each, nothing else
        ids = [point for _, _, point in walked]
        assert ids == sorted(ids)  # point-id order: what the cursor's position relies on
        assert walked == _walk(index, AclFilter.for_groups({group}), limit)
    both = _walk(index, AclFilter.for_groups(set(GROUPS)), limit)
    assert sorted((d, i) for d, i, _ in both) == sorted(held["eng"] | held["hr"])
    if docs:
        only = _walk(index, AclFilter.for_groups(set(GROUPS)), limit, doc_id="d0")
        assert sorted((d, i) for d, i, _ in only) == sorted(x for x in held["eng"] | held["hr"] if x[0] == "d0")


def test_an_item_carries_where_and_why_and_no_groups_admit_nothing(opener: IndexOpener) -> None:
    index = opener("one")
    _fill(index, [(0, 1, 1)])
    page, after = index.list_quarantined(acl=AclFilter.for_groups({"eng"}), after=None, limit=5)
    assert after is None and len(page) == 1
    q = page[0]
    assert (q.doc_id, q.source, q.title, q.page, q.chunk_index, q.flags) == (
        "d0",
        "/c/d0.md",
        "d0",
        "H 0",
        0,
        ("injection:rule",),
    )
    assert not hasattr(q, "text")
    assert index.list_quarantined(acl=AclFilter.for_groups(set()), after=None, limit=5) == ([], None)
