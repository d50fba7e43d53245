"""Whatever happens to a file's content, its indexed chunks never keep a wider ACL than
the one its location has now, nor take a wider one than they had unless their content was read from
that location this run (real embedded Edge index, hash embedder).

The rule (docs/ingestion.md): a document that is not re-indexed successfully gets the ACL its
location resolves to now where it narrows its own (``no_wider``), applied to its existing chunks
(reported under ``acl_previous``), or is withdrawn when no ACL applies any more or nobody is left. A
document about to be re-indexed gets it before its new chunks are written, so a load failure cannot
leave the old ACL behind. (Outside review F1: a folder moved away with its ACL file must not make its
documents readable under the parent's ACL.)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ingest.discover.acl as acl_module
from docquery.config.settings import Settings
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.domain import AclFilter, Chunk
from docquery.core.ports import IndexAdapter
from docquery.wiring import build_index
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from ingest.plan.compare import APPLIED, WITHDRAWN, no_wider
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
        good = dict.fromkeys(FILES, True)  # the file is there and loads
        expected: dict[str, tuple[str, ...] | None] = {name: acl[folder] for name, folder in FILES.items()}
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
                    good[name] = True
                elif kind in ("fail", "acl+fail"):
                    write(docs / FILES[name] / name, _broken(name))
                    good[name] = False
                elif kind == "delete":
                    (docs / FILES[name] / name).unlink(missing_ok=True)
                    good[name] = False
                report = run_ingest(
                    cfg, IngestOptions(paths=(docs,), delete_missing=delete_missing), embedder=embedder, index=index
                )
                assert report.error is None
                assert {a["action"] for a in report.acl_previous} <= {APPLIED, WITHDRAWN}
                for doc, folder in FILES.items():
                    present = (docs / folder / doc).exists()
                    if good[doc]:
                        expected[doc] = acl[folder]  # read from its location this run: its ACL in full
                    elif expected[doc] is not None:
                        gone = not present and delete_missing
                        expected[doc] = None if gone else no_wider(expected[doc] or (), acl[folder])
                _check(index, embedder, expected)
        finally:
            index.close()


def _check(index: IndexAdapter, embedder: HashEmbedder, expected: dict[str, tuple[str, ...] | None]) -> None:
    records = {r.doc_id: r for r in index.list_documents()}
    indexed = {Path(r.extra["path"]).name: tuple(r.acl_groups) for r in records.values()}
    assert indexed == {name: groups for name, groups in expected.items() if groups is not None}
    chunks = visible_chunks(index, embedder)
    assert len(chunks) == index.count_chunks(), "a chunk no group can find (or a quarantined one)"
    for chunk in chunks.values():
        assert chunk.acl_groups == expected[Path(records[chunk.doc_id].extra["path"]).name], chunk.source


def test_the_reviews_reproduction_narrowed_acl_and_nul_bytes(ingest_env: IngestEnv) -> None:
    """[staff] -> [hr] while the file gains NUL bytes: its old chunks must not stay readable by staff, and
    hr, who never could read that version, does not get it either: it is withdrawn until the file loads."""
    env = ingest_env
    write(env.docs / "team" / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "team" / "plan.txt", "The reorganisation plan: three teams merge in May.")
    env.run(groups=None)
    write(env.docs / "team" / ACL_FILE, "groups: [hr]\n")
    write(env.docs / "team" / "plan.txt", b"The reorganisation plan\x00\x00 with NUL bytes\x00" * 10)
    report = env.run(groups=None)
    assert [f["reason"] for f in report.failed] == ["binary content in a text file"]
    assert report.acl_previous == [{"path": str(env.docs / "team" / "plan.txt"), "action": WITHDRAWN}]
    assert _finds(env, "staff", "reorganisation plan") == _finds(env, "hr", "reorganisation plan") == []
    assert "plan.txt" not in env.state()
    write(env.docs / "team" / "plan.txt", "The reorganisation plan: three teams merge in June.")
    env.run(groups=None)  # readable again: indexed under the ACL of where it is read from
    assert _finds(env, "hr", "reorganisation plan") == ["docs/team/plan.txt"]


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
    assert env.run(groups=None).acl_previous == [{"path": str(env.docs / "team" / "plan.txt"), "action": WITHDRAWN}]


def _finds(env: IngestEnv, group: str, text: str) -> list[str]:
    hits = asyncio.run(
        env.index.search(dense=None, text=text, acl=AclFilter.for_groups({group}), limit=10, mode="sparse")
    )
    return [h.chunk.source for h in hits]


MOVES = {
    "renamed to a dot-folder": lambda docs: (docs / "hr").rename(docs / ".hr-old"),
    "deleted": lambda docs: shutil.rmtree(docs / "hr"),
    "moved out of the roots": lambda docs: (docs / "hr").rename(docs.parent / "hr-archive"),
    "its ACL file deleted": lambda docs: (docs / "hr" / ACL_FILE).unlink() or (docs / "hr" / "salaries.txt").unlink(),
}


@pytest.mark.parametrize("move", list(MOVES), ids=list(MOVES))
def test_a_folder_gone_with_its_acl_file_never_widens_its_documents(ingest_env: IngestEnv, move: str) -> None:
    """Outside review F1: `mv hr .hr-old` under a public root made HR's indexed salaries public."""
    env = ingest_env
    write(env.docs / ACL_FILE, "public: true\n")
    write(env.docs / "hr" / ACL_FILE, "groups: [hr]\n")
    write(env.docs / "hr" / "salaries.txt", "The salary of the chief executive is 987654 dollars per year.")
    write(env.docs / "canteen.txt", "The canteen opens at noon.")
    env.run(groups=None)
    MOVES[move](env.docs)
    report = env.run(groups=None)
    assert report.error is None and report.acl_previous == []  # nothing to narrow, nothing widened
    assert _finds(env, "anyone", "salary chief executive") == []
    assert _finds(env, "hr", "salary chief executive") == ["docs/hr/salaries.txt"]
    assert env.state()["salaries.txt"][3] == ("hr",)
    env.run(groups=None, delete_missing=True)
    assert _finds(env, "hr", "salary chief executive") == [] and sorted(env.state()) == ["canteen.txt"]


def test_a_folder_that_hides_its_acl_file_withdraws_its_documents(
    ingest_env: IngestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the ingest cannot look into is never taken to have no ACL file: its documents are
    withdrawn (never relabelled with the parent's ACL), and the rest of the run goes on."""
    env = ingest_env
    write(env.docs / ACL_FILE, "public: true\n")
    write(env.docs / "hr" / ACL_FILE, "groups: [hr]\n")
    write(env.docs / "hr" / "salaries.txt", "The salary of the chief executive is 987654 dollars per year.")
    env.run(groups=None)
    write(env.docs / "canteen.txt", "The canteen opens at noon.")
    real_stat = os.stat

    def denied(path: object, *args: object, dir_fd: int | None = None, **kwargs: object) -> os.stat_result:
        where = Path(f"/proc/self/fd/{dir_fd}").readlink() / str(path) if dir_fd is not None else Path(str(path))
        if where.parent == env.docs / "hr" and where.name == ACL_FILE:  # as `chmod 000 hr` does for anyone but root
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, dir_fd=dir_fd, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(acl_module.os, "stat", denied)
    report = env.run(groups=None)
    monkeypatch.undo()
    assert not report.ok and report.added == 1
    reasons = {Path(f["path"]).name: f["reason"] for f in report.failed}
    assert "is refused" in reasons["salaries.txt"]
    assert "cannot tell whether" in reasons["hr"] and "(Permission denied)" in reasons["hr"]
    assert _finds(env, "anyone", "salary chief executive") == []
    assert _finds(env, "hr", "salary chief executive") == []
    assert sorted(env.state()) == ["canteen.txt"]


_LABELS = st.lists(st.sampled_from(["hr", "staff", "eng", PUBLIC_GROUP]), min_size=1, max_size=3, unique=True)


def _readers(groups: tuple[str, ...] | None, callers: set[frozenset[str]]) -> set[frozenset[str]]:
    """Which callers (each a set of groups) an ACL admits: public admits every caller with a group."""
    if groups is None:
        return set()
    return {c for c in callers if c and (PUBLIC_GROUP in groups or c & set(groups))}


@settings(max_examples=300, deadline=None)
@given(old=_LABELS, now=_LABELS)
def test_no_wider_admits_no_caller_that_either_acl_refuses(old: list[str], now: list[str]) -> None:
    callers = {frozenset(s) for s in ({"hr"}, {"staff"}, {"eng"}, {"other"}, {"hr", "staff"}, {"eng", "other"})}
    result = no_wider(tuple(old), tuple(now))
    admitted = _readers(result, callers)
    assert admitted <= _readers(tuple(old), callers) & _readers(tuple(now), callers)
    # And no narrower than a list of groups can say: every group both admit (a caller in one group of
    # old and another of now is admitted by both, but no list admits just such callers).
    both = [g for g in UNIVERSE if _readers(tuple(old), {frozenset({g})}) and _readers(tuple(now), {frozenset({g})})]
    assert {frozenset({g}) for g in both} <= admitted
