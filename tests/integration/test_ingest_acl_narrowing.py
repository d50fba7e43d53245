"""#17.3: whatever happens to a file's content, its indexed chunks never keep a wider ACL than
the one its location has now (real embedded Edge index, hash embedder).

The rule (docs/ingestion.md): a document that is not re-indexed successfully gets the ACL its
location resolves to now, applied to its existing chunks (reported under ``acl_previous``), or is
withdrawn when no ACL applies any more. A document about to be re-indexed gets it before its new
chunks are written, so a load failure cannot leave the old ACL behind.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.config.settings import Settings
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.domain import AclFilter, Chunk
from docquery.core.ports import IndexAdapter
from docquery.wiring import build_index
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from ingest.plan.compare import APPLIED, WITHDRAWN
from tests.support.fakes import HashEmbedder
from tests.support.ingest_fixtures import IngestEnv, ingest_env, make_pdf, write

__all__ = ["ingest_env"]

GROUP_SETS = [("staff",), ("hr",), ("eng",), ("hr", "staff")]
UNIVERSE = ["staff", "hr", "eng", "other"]
FILES = {"doc0.txt": "a", "doc1.pdf": "a", "doc2.txt": "b", "doc3.pdf": "b"}  # name -> folder


def _content(name: str, version: int) -> bytes:
    text = f"Version {version} of {name}: the quarterly figures and the staffing plan."
    return make_pdf([text]) if name.endswith(".pdf") else text.encode()


def _broken(name: str) -> bytes:
    if name.endswith(".pdf"):
        return b"%PDF-1.7\n1 0 obj << /Pages 2 0 R >> garbage"  # passes the header check, fails to load
    return b"\x00\x01\x02 NUL bytes \x00" * 20  # refused by the plan's binary check


def visible_chunks(index: IndexAdapter, embedder: HashEmbedder) -> dict[str, Chunk]:
    """Every retrievable chunk, found by asking as each group in turn."""
    query = embedder.embed(["quarterly figures staffing plan"], query=True)[0]
    out: dict[str, Chunk] = {}
    for group in UNIVERSE:
        hits = asyncio.run(
            index.search(dense=query, text=None, acl=AclFilter.for_groups({group}), limit=1000, mode="dense")
        )
        for hit in hits:
            assert group in hit.chunk.acl_groups or PUBLIC_GROUP in hit.chunk.acl_groups
            out[hit.chunk.id] = hit.chunk
    return out


_OPS = st.one_of(
    st.tuples(st.just("content"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("acl"), st.sampled_from(["a", "b"]), st.sampled_from(range(len(GROUP_SETS)))),
    st.tuples(st.just("fail"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("delete"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("acl+fail"), st.sampled_from(sorted(FILES)), st.sampled_from(range(len(GROUP_SETS)))),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(_OPS, st.booleans()), min_size=1, max_size=6))
def test_no_chunk_keeps_a_wider_acl_than_its_location_has_now(steps: list[tuple[tuple[object, ...], bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cfg = Settings(data_dir=base / "data", secrets_dir=base / "secrets")
        cfg = cfg.model_copy(update={"ingest": cfg.ingest.model_copy(update={"parse_process": "off"})})
        embedder = HashEmbedder()
        index = build_index(cfg, embedder)
        docs = base / "docs"
        acl = {"a": GROUP_SETS[0], "b": GROUP_SETS[1]}
        version = dict.fromkeys(FILES, 0)
        try:
            for folder, groups in acl.items():
                write(docs / folder / ACL_FILE, f"groups: [{', '.join(groups)}]\n")
            for name, folder in FILES.items():
                write(docs / folder / name, _content(name, 0))
            run_ingest(cfg, IngestOptions(paths=(docs,)), embedder=embedder, index=index)
            for op, delete_missing in steps:
                kind, name = op[0], str(op[1])
                if kind in ("acl", "acl+fail"):
                    folder = name if kind == "acl" else FILES[name]
                    acl[folder] = GROUP_SETS[int(op[2])]  # type: ignore[call-overload]
                    write(docs / folder / ACL_FILE, f"groups: [{', '.join(acl[folder])}]\n")
                if kind == "content":
                    version[name] += 1
                    write(docs / FILES[name] / name, _content(name, version[name]))
                elif kind in ("fail", "acl+fail"):
                    write(docs / FILES[name] / name, _broken(name))
                elif kind == "delete":
                    (docs / FILES[name] / name).unlink(missing_ok=True)
                report = run_ingest(
                    cfg, IngestOptions(paths=(docs,), delete_missing=delete_missing), embedder=embedder, index=index
                )
                assert report.error is None
                assert {a["action"] for a in report.acl_previous} <= {APPLIED, WITHDRAWN}
                _check(index, embedder, docs, acl)
        finally:
            index.close()


def _check(index: IndexAdapter, embedder: HashEmbedder, docs: Path, acl: dict[str, tuple[str, ...]]) -> None:
    records = {r.doc_id: r for r in index.list_documents()}
    for record in records.values():
        folder = Path(record.extra["path"]).parent.name
        assert tuple(record.acl_groups) == acl[folder], (record.source, record.acl_groups, acl[folder])
    chunks = visible_chunks(index, embedder)
    assert len(chunks) == index.count_chunks(), "a chunk no group can find (or a quarantined one)"
    for chunk in chunks.values():
        folder = Path(records[chunk.doc_id].extra["path"]).parent.name
        assert chunk.acl_groups == acl[folder], (chunk.source, chunk.acl_groups, acl[folder])
    assert docs.exists()


def test_the_reviews_reproduction_narrowed_acl_and_nul_bytes(ingest_env: IngestEnv) -> None:
    """[staff] -> [hr] while the file gains NUL bytes: its old chunks must not stay readable by staff."""
    env = ingest_env
    write(env.docs / "team" / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "team" / "plan.txt", "The reorganisation plan: three teams merge in May.")
    env.run(groups=None)
    write(env.docs / "team" / ACL_FILE, "groups: [hr]\n")
    write(env.docs / "team" / "plan.txt", b"The reorganisation plan\x00\x00 with NUL bytes\x00" * 10)
    report = env.run(groups=None)
    assert [f["reason"] for f in report.failed] == ["binary content in a text file"]
    assert report.acl_previous == [{"path": str(env.docs / "team" / "plan.txt"), "action": APPLIED}]
    staff, hr = (
        asyncio.run(env.index.search(dense=None, text="reorganisation plan", acl=AclFilter.for_groups({g}),
                                     limit=10, mode="sparse"))
        for g in ("staff", "hr")
    )  # fmt: skip
    assert staff == [] and hr and all(h.chunk.acl_groups == ("hr",) for h in hr)
    assert env.state()["plan.txt"][3] == ("hr",)


def test_no_acl_left_withdraws_the_previous_version(ingest_env: IngestEnv) -> None:
    env = ingest_env
    write(env.docs / "team" / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "team" / "plan.txt", "The reorganisation plan.")
    write(env.docs / "other" / ACL_FILE, "groups: [eng]\n")
    write(env.docs / "other" / "keep.txt", "Unrelated.")
    env.run(groups=None)
    # The folder loses its ACL file and the file goes (no --delete-missing): no ACL applies to
    # the indexed version any more, so it is withdrawn rather than left under [staff].
    (env.docs / "team" / ACL_FILE).unlink()
    (env.docs / "team" / "plan.txt").unlink()
    report = env.run(groups=None)
    assert report.acl_previous == [{"path": str(env.docs / "team" / "plan.txt"), "action": WITHDRAWN}]
    assert sorted(env.state()) == ["keep.txt"]


def test_dry_run_lists_the_acl_it_would_apply(ingest_env: IngestEnv) -> None:
    env = ingest_env
    write(env.docs / "team" / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "team" / "plan.txt", "The reorganisation plan.")
    env.run(groups=None)
    write(env.docs / "team" / ACL_FILE, "groups: [hr]\n")
    (env.docs / "team" / "plan.txt").unlink()
    report = env.run(groups=None, dry_run=True)
    assert report.plan is not None and report.plan["acl_previous"] == [str(env.docs / "team" / "plan.txt")]
    assert env.state()["plan.txt"][3] == ("staff",), "a dry run writes nothing"
    assert env.run(groups=None).acl_previous == [{"path": str(env.docs / "team" / "plan.txt"), "action": APPLIED}]
