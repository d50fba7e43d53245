"""The upload quota finds a tenant's records, and a job's status its records, through keyword indexes on
``extra.tenant`` and ``extra.job``, on both engines.

A writer makes the indexes (at its first record or its first doc-id key), a collection written before them
gets them the same way, and the lookups return exactly the tenant's or the job's records whichever way they
were written. The embedded engine's schema is read to show the index is there; the server path's local mode
keeps no payload indexes (it scans), so there only the answers are checked.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from docquery.api.uploads.rules import held_by
from docquery.core.collection import Key, document_point_id
from docquery.core.domain import DocumentRecord
from docquery.core.uploads import EXTRA_JOB, EXTRA_TENANT, tenant_key
from docquery.index import QdrantIndex, open_edge
from docquery.index.engine import Point
from docquery.index.payload import document_payload
from docquery.index.store import INDEXED_EXTRA
from tests.integration.conftest import INDEX_DIM, IndexOpener

TENANT_PATH = f"{Key.EXTRA.value}.{EXTRA_TENANT}"
JOB_PATH = f"{Key.EXTRA.value}.{EXTRA_JOB}"
JOBS = [f"{j:032x}" for j in range(5)]
# Tenants as credentials name them: the record keeps a digest, so any text is one keyword.
TENANTS = ["eng", "Eng", "eng ", "hr\u00a0", "t/1", "\u3000", "x" * 300, "ümlaut", "a,b"]
_names = itertools.count()


def _record(i: int, tenant: str | None) -> DocumentRecord:
    extra = {EXTRA_TENANT: tenant_key(tenant), EXTRA_JOB: JOBS[i % len(JOBS)]} if tenant is not None else {}
    return DocumentRecord(
        doc_id=f"doc-{i:04d}", source=f"/c/{i}", root="/c", content_sha256="0" * 64, chunk_count=1,
        acl_groups=("eng",), extra=extra,
    )  # fmt: skip


def _records() -> list[DocumentRecord]:
    # Every tenant holds some records; some records have no tenant (the corpus's own).
    return [_record(i, None if i % 7 == 0 else TENANTS[i % len(TENANTS)]) for i in range(120)]


def _expected(records: list[DocumentRecord], tenant: str) -> set[str]:
    return {r.doc_id for r in records if r.extra.get(EXTRA_TENANT) == tenant_key(tenant)}


def _of_job(records: list[DocumentRecord], job: str) -> set[str]:
    return {r.doc_id for r in records if r.extra.get(EXTRA_JOB) == job}


def _schema(index: QdrantIndex) -> set[str]:
    return set(index._engine._shard.info().payload_schema)  # type: ignore[attr-defined]


def test_the_quota_lookup_finds_exactly_each_tenants_records(opener: IndexOpener) -> None:
    index = opener(f"c{next(_names)}")
    records = _records()
    index.put_documents(records)
    for tenant in [*TENANTS, "nobody"]:
        assert {r.doc_id for r in held_by(index, tenant)} == _expected(records, tenant), tenant


def test_a_job_lookup_finds_exactly_the_jobs_records(opener: IndexOpener) -> None:
    index = opener(f"c{next(_names)}")
    records = _records()
    index.put_documents(records)
    for job in [*JOBS, "f" * 32]:
        assert {r.doc_id for r in index.list_documents(extra=(EXTRA_JOB, job))} == _of_job(records, job), job


def test_a_collection_written_before_the_index_gets_it_at_its_next_write(opener: IndexOpener) -> None:
    name = f"c{next(_names)}"
    index = opener(name)
    old = _records()
    # As an earlier build wrote them: the records, and no index on the tenant.
    index._engine.upsert([Point(document_point_id(r.doc_id), dict(document_payload(r))) for r in old])
    edge = "edge" in type(index._engine).__name__.lower()
    if edge:
        assert {TENANT_PATH, JOB_PATH}.isdisjoint(_schema(index))
    for tenant in TENANTS:  # unindexed, the lookups still answer (by a scan)
        assert {r.doc_id for r in held_by(index, tenant)} == _expected(old, tenant)
    assert {r.doc_id for r in index.list_documents(extra=(EXTRA_JOB, JOBS[1]))} == _of_job(old, JOBS[1])
    new = _record(500, "eng")
    index.put_documents([new])
    if edge:
        assert {TENANT_PATH, JOB_PATH} <= _schema(index)
    assert {r.doc_id for r in held_by(index, "eng")} == _expected([*old, new], "eng")
    job = new.extra[EXTRA_JOB]
    assert {r.doc_id for r in index.list_documents(extra=(EXTRA_JOB, job))} == _of_job([*old, new], job)


def test_a_writer_that_asks_for_the_doc_id_key_first_has_the_index(tmp_path: Path) -> None:
    index = open_edge(tmp_path / "k", name="k", model_id="m", dimension=INDEX_DIM)
    try:
        assert {TENANT_PATH, JOB_PATH}.isdisjoint(_schema(index))  # a reader never makes them
        index.ensure_doc_id_key()  # what an upload does before it counts its tenant's records
        assert {TENANT_PATH, JOB_PATH} <= _schema(index)
        assert [f"{Key.EXTRA.value}.{k}" for k in INDEXED_EXTRA] == [TENANT_PATH, JOB_PATH]
    finally:
        index.close()


def test_making_the_index_again_changes_nothing(tmp_path: Path) -> None:
    records = _records()
    index = open_edge(tmp_path / "again", name="again", model_id="m", dimension=INDEX_DIM)
    index.put_documents(records)
    index.close()
    index = open_edge(tmp_path / "again", name="again", model_id="m", dimension=INDEX_DIM)  # another writer process
    try:
        index.put_documents([_record(900, "hr\u00a0")])
        assert {TENANT_PATH, JOB_PATH} <= _schema(index)
        assert {r.doc_id for r in held_by(index, "hr\u00a0")} == _expected(records, "hr\u00a0") | {"doc-0900"}
    finally:
        index.close()
