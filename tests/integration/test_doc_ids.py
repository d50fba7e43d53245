"""Keyed doc ids: a doc_id is an HMAC of the path under the collection's own key, kept in its meta point;
a collection made before the key keeps its unkeyed ids, so re-ingest stays idempotent either way."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docquery.core.collection import META_POINT_ID, Key, document_id
from docquery.core.domain import DocumentRecord
from docquery.index.engine import Point
from docquery.index.store import QdrantIndex
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]

DOCS = {"a.txt": "Alpha travel policy.", "sub/b.txt": "Bravo expense rules.", "c.md": "# Charlie\n\nOn-call."}


@given(path=st.text(min_size=1, max_size=60), key=st.binary(min_size=32, max_size=32))
def test_a_keyed_id_is_not_the_unkeyed_hash_and_depends_on_the_key(path: str, key: bytes) -> None:
    keyed = document_id(path, key)
    assert keyed != document_id(path, None)
    assert keyed != document_id(path, bytes(b ^ 1 for b in key))
    assert keyed == document_id(path, key) and len(keyed) == 32


def _ids(env: IngestEnv) -> dict[str, str]:
    return {r.source: r.doc_id for r in env.index.list_documents()}


def _fill(env: IngestEnv) -> None:
    for rel, text in DOCS.items():
        write(env.docs / rel, text)


def test_a_new_collection_keys_its_ids_and_re_ingest_is_idempotent(ingest_env: IngestEnv) -> None:
    env = ingest_env
    assert isinstance(env.index, QdrantIndex)
    key = env.index.doc_id_key()
    assert key is not None and len(key) == 32  # made with the collection, kept in its meta point
    _fill(env)
    env.run()
    ids = _ids(env)
    for r in env.index.list_documents():
        path = Path(r.extra["path"])
        assert r.doc_id == document_id(path, key) != document_id(path, None)
    report = env.run()
    assert report.unchanged == len(DOCS) and _ids(env) == ids


def _make_legacy(index: QdrantIndex) -> None:
    meta = index.read_meta() or {}
    meta.pop(Key.DOC_ID_KEY)
    index._engine.upsert([Point(str(META_POINT_ID), meta)])  # as a build before keyed ids wrote it


def test_a_collection_from_before_keyed_ids_keeps_its_ids_and_says_so(
    ingest_env: IngestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    env = ingest_env
    assert isinstance(env.index, QdrantIndex)
    _make_legacy(env.index)
    older = DocumentRecord(
        doc_id=document_id("/elsewhere/older.txt", None), source="older.txt", root="/elsewhere",
        content_sha256="0" * 64, chunk_count=0, acl_groups=("staff",),
    )  # fmt: skip
    env.index.put_documents([older])  # a document written before keyed ids
    with caplog.at_level(logging.WARNING):
        QdrantIndex(env.index._engine, name="legacy", model_id=env.embedder.model_id, dimension=env.embedder.dimension)
    assert "no doc-id key" in caplog.text
    _fill(env)
    env.run()
    assert env.index.doc_id_key() is None  # its ids are kept: a new key would re-id (and re-index) everything
    for r in env.index.list_documents():
        if r.doc_id != older.doc_id:
            assert r.doc_id == document_id(Path(r.extra["path"]), None)
    ids = _ids(env)
    report = env.run()
    assert report.unchanged == len(DOCS) and _ids(env) == ids


def test_an_empty_collection_without_a_key_gets_one_at_its_first_ingest(ingest_env: IngestEnv) -> None:
    env = ingest_env
    assert isinstance(env.index, QdrantIndex)
    _make_legacy(env.index)
    _fill(env)
    env.run(dry_run=True)
    assert env.index.doc_id_key() is None  # a dry run writes nothing
    env.run()
    key = env.index.doc_id_key()
    assert key is not None
    assert all(r.doc_id == document_id(Path(r.extra["path"]), key) for r in env.index.list_documents())
