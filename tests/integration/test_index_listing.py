"""Document listings read one page from the index: an ordered scroll on ``list_key``, on both engines.

The order is ``(list_key, doc_id)``; records that share a key (forced here with a coarse key) come
whole and once across page boundaries; a collection written before the key existed is listed by the
old full read, in the same order, and the next write of a record migrates it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import docquery.index.payload as payload_module
import docquery.index.store as store_module
from docquery.core.collection import META_POINT_ID, Key, document_point_id, list_key
from docquery.core.domain import AclFilter, DocumentRecord
from docquery.index import QdrantIndex
from docquery.index.engine import Point
from docquery.index.payload import document_payload
from tests.integration.conftest import IndexOpener

_names = itertools.count()


def record(doc_id: str, groups: tuple[str, ...]) -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id, source=f"/c/{doc_id}", root="/c", content_sha256="0" * 64, chunk_count=1, acl_groups=groups
    )


def walk(index: QdrantIndex, acl: AclFilter, limit: int) -> list[str]:
    out: list[str] = []
    after: str | None = None
    for _ in range(10_000):
        page, more = index.list_page(acl=acl, after=after, limit=limit)
        assert len(page) <= limit
        out += [r.doc_id for r in page]
        if not more:
            return out
        after = page[-1].doc_id
    raise AssertionError("the walk did not end")


ids = st.lists(st.from_regex(r"[a-z]{1,6}-[0-9]{1,3}", fullmatch=True), min_size=0, max_size=40, unique=True)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=ids, limit=st.integers(1, 12), coarse=st.booleans())
def test_a_walk_lists_every_visible_record_once_in_key_order(
    opener: IndexOpener, monkeypatch: pytest.MonkeyPatch, docs: list[str], limit: int, coarse: bool
) -> None:
    key: Callable[[str], int] = (lambda d: len(d) % 3) if coarse else list_key  # coarse: many records per key
    with monkeypatch.context() as m:
        m.setattr(store_module, "list_key", key)
        m.setattr(payload_module, "list_key", key)
        index = opener(f"walk{next(_names)}")
        index.put_documents([record(d, ("eng",) if i % 3 else ("hr",)) for i, d in enumerate(docs)])
        eng = sorted((d for i, d in enumerate(docs) if i % 3), key=lambda d: (key(d), d))
        assert walk(index, AclFilter.for_groups({"eng"}), limit) == eng
        assert walk(index, AclFilter.for_groups(set()), limit) == []


def test_a_collection_from_before_list_keys_is_listed_then_migrated(opener: IndexOpener) -> None:
    index = opener("old")
    docs = [f"doc-{i:03d}" for i in range(30)]
    old: list[Point] = []
    for d in docs:
        payload: dict[str, Any] = dict(document_payload(record(d, ("eng",))))
        payload.pop(Key.LIST_KEY)
        old.append(Point(document_point_id(d), payload))
    index._engine.upsert(old)  # as an earlier build wrote them: no list key, no listing mark
    meta = index.read_meta() or {}
    meta.pop(Key.LISTING)
    index._engine.upsert([Point(str(META_POINT_ID), meta)])
    acl = AclFilter.for_groups({"eng"})
    expected = sorted(docs, key=lambda d: (list_key(d), d))
    assert not index.listing_keyed()
    assert walk(index, acl, 7) == expected  # the full read, in the same order
    index.put_documents([record("doc-new", ("eng",))])  # a writer migrates the collection first
    assert index.listing_keyed()
    assert walk(index, acl, 7) == sorted([*docs, "doc-new"], key=lambda d: (list_key(d), d))
    assert index.key_listing() == 0  # once
