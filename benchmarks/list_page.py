"""One ``/v1/documents`` page read from the embedded index, at two catalogue sizes.

Writes ``N`` document records (no chunks: a listing reads records only) into a fresh Edge shard, then
times ``QdrantIndex.list_page`` with ``limit=1`` from the start and from cursors spread over the
listing, against the full catalogue read the route used before (``list_documents`` and a sort).

With ``--tenants``, the records also belong to 50 upload tenants and to jobs of 20, and it times the upload
quota's count (``held_by``, at every upload) for a tenant holding none and for one holding a fiftieth of the
catalogue, and a job's lookup (``GET /v1/ingest/jobs/{id}``'s read).

    .venv/bin/python -m benchmarks.list_page --sizes 500 50000
    .venv/bin/python -m benchmarks.list_page --sizes 500 50000 --tenants
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from docquery.api.uploads.rules import held_by
from docquery.core.domain import AclFilter, DocumentRecord
from docquery.core.uploads import EXTRA_BYTES, EXTRA_JOB, EXTRA_TENANT, tenant_key
from docquery.index import open_edge

TENANTS = 50
JOB_SIZE = 20


def _extra(i: int) -> dict[str, str]:
    return {EXTRA_TENANT: tenant_key(f"t{i % TENANTS}"), EXTRA_JOB: f"{i // JOB_SIZE:032x}", EXTRA_BYTES: "1000"}


def timed(fn: object, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(n: int, reps: int, tmp: Path, *, tenants: bool = False) -> None:
    index = open_edge(tmp / f"n{n}", name=f"n{n}", model_id="bench", dimension=8)
    records = [
        DocumentRecord(
            doc_id=f"{i:064x}",
            source=f"/corpus/dir{i % 97}/file{i}.md",
            root="/corpus",
            content_sha256="0" * 64,
            chunk_count=3,
            acl_groups=("eng",) if i % 4 else ("hr", "eng"),
            title=f"Document {i}",
            extra=_extra(i) if tenants else {},
        )
        for i in range(n)
    ]
    for start in range(0, n, 1000):
        index.put_documents(records[start : start + 1000])
    index.flush()
    index.optimize()
    acl = AclFilter.for_groups({"eng"})
    rng = random.Random(7)
    cursors = [r.doc_id for r in rng.sample(records, min(50, n))]

    def first() -> None:
        index.list_page(acl=acl, after=None, limit=1)

    def later() -> None:
        index.list_page(acl=acl, after=rng.choice(cursors), limit=1)

    def full() -> None:
        sorted(index.list_documents(acl=acl), key=lambda d: d.doc_id)

    first_ms, later_ms = timed(first, reps), timed(later, reps)
    full_ms = timed(full, 3)
    print(
        f"{n:>6} documents: limit=1 first page p50 {statistics.median(first_ms):.2f} ms, "
        f"from a cursor p50 {statistics.median(later_ms):.2f} ms (p99 {sorted(later_ms)[int(reps * 0.99) - 1]:.2f}); "
        f"the whole-catalogue read and sort {statistics.median(full_ms):.0f} ms"
    )
    if tenants:
        none_ms = timed(lambda: held_by(index, "nobody"), 20)
        some_ms = timed(lambda: held_by(index, "t7"), 20)
        job = f"{n // JOB_SIZE // 2:032x}"
        job_ms = timed(lambda: index.list_documents(extra=(EXTRA_JOB, job)), 20)
        print(
            f"{n:>6} documents: the upload quota's count p50 {statistics.median(none_ms):.2f} ms for a tenant "
            f"holding none, {statistics.median(some_ms):.2f} ms for one holding {len(held_by(index, 't7'))}; "
            f"a job's lookup p50 {statistics.median(job_ms):.2f} ms "
            f"({len(index.list_documents(extra=(EXTRA_JOB, job)))} records)"
        )
    index.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 50_000])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--tenants", action="store_true", help="also time the upload quota's count")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            run(n, args.reps, Path(tmp), tenants=args.tenants)


if __name__ == "__main__":
    main()
