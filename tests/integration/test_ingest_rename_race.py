"""Folders renamed, exchanged or swapped for links at each stage of a run never put one folder's content
under another folder's ACL (real pipeline, real Edge index, hash embedder).

Hook-driven: the swap runs inside the pipeline, right after discovery, right after the plan, or as
parsing starts (in this process, or before the parse process opens anything). Every folder carries
its own ACL file, so HR's text belongs under ``[hr]`` and the canteen's under public wherever the
folders are moved; any chunk found under the other ACL is a relabelled read. A file caught by a swap
is reported as changed during the run, and the next run, with nothing moving, indexes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.config.settings import Settings
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.domain import AclFilter
from docquery.core.ports import IndexAdapter
from docquery.wiring import build_index
from ingest import pipeline
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from ingest.prepare import parsing
from ingest.reading import CHANGED
from tests.support.fakes import HashEmbedder
from tests.support.ingest_fixtures import write

HR_TEXT = "Salary bands for the board: the chief executive earns 987654 a year."
PUBLIC_TEXT = "Canteen hours: the canteen opens at noon and closes at three."
FOLDERS = ("hr", "pub", "deep/hr", "deep/pub")


def _corpus(docs: Path) -> None:
    write(docs / ACL_FILE, "groups: [staff]\n")
    for folder in FOLDERS:
        hr = folder.endswith("hr")
        write(docs / folder / ACL_FILE, "groups: [hr]\n" if hr else "public: true\n")
        write(docs / folder / "note.txt", HR_TEXT if hr else PUBLIC_TEXT)
        write(docs / folder / "x" / ACL_FILE, "groups: [hr]\n" if hr else "public: true\n")
        write(docs / folder / "x" / "more.md", "# More\n\n" + (HR_TEXT if hr else PUBLIC_TEXT) + "\n")


def _exchange(a: str, b: str) -> Callable[[Path], None]:
    def act(docs: Path) -> None:
        if (docs / a).exists() or (docs / a).is_symlink():
            (docs / a).rename(docs / "swap-tmp")
            if (docs / b).exists() or (docs / b).is_symlink():
                (docs / b).rename(docs / a)
            (docs / "swap-tmp").rename(docs / b)

    return act


def _link(name: str, to: str) -> Callable[[Path], None]:
    """``name`` renamed away and replaced by a link to ``to``: the same path now reaches other content."""

    def act(docs: Path) -> None:
        if (docs / name).is_symlink():
            return
        if (docs / name).exists():
            (docs / name).rename(docs / f"{name.replace('/', '-')}-old")
        (docs / name).symlink_to(docs / to, target_is_directory=True)

    return act


SWAPS: dict[str, Callable[[Path], None]] = {
    "exchange hr and pub": _exchange("hr", "pub"),
    "exchange deep/hr and deep/pub": _exchange("deep/hr", "deep/pub"),
    "exchange a parent (deep) with a folder": _exchange("deep", "pub"),
    "exchange hr/x and pub/x": _exchange("hr/x", "pub/x"),
    "pub replaced by a link to hr": _link("pub", "hr"),
    "deep/pub replaced by a link to deep/hr": _link("deep/pub", "deep/hr"),
}
STAGES = ("after discovery", "after planning", "as parsing starts")


@contextlib.contextmanager
def _swap_at(stage: str, act: Callable[[], None]) -> Iterator[None]:
    """Runs ``act`` once, at ``stage`` of the next run."""
    with pytest.MonkeyPatch.context() as mp:
        if stage == "after discovery":
            real_discover = pipeline.discover

            def discover(*args: Any, **kwargs: Any) -> Any:
                found = real_discover(*args, **kwargs)
                act()
                return found

            mp.setattr(pipeline, "discover", discover)
        elif stage == "after planning":
            real_plan = pipeline.build_plan

            def build_plan(*args: Any, **kwargs: Any) -> Any:
                plan = real_plan(*args, **kwargs)
                act()
                return plan

            mp.setattr(pipeline, "build_plan", build_plan)
        else:
            real_routed = parsing.routed

            def routed(*args: Any, **kwargs: Any) -> Any:
                act()  # before the first file is read, here or in the parse process
                yield from real_routed(*args, **kwargs)

            mp.setattr("ingest.write.stream.routed", routed)
        yield


def _labels(index: IndexAdapter, embedder: HashEmbedder) -> dict[str, set[tuple[str, ...]]]:
    """Text -> the ACLs it is readable under, over every searchable chunk."""
    query = embedder.embed([HR_TEXT], query=True)[0]
    out: dict[str, set[tuple[str, ...]]] = {}
    for group in ("hr", "staff", "nobody"):
        for hit in asyncio.run(
            index.search(dense=query, text=None, acl=AclFilter.for_groups({group}), limit=1000, mode="dense")
        ):
            text = HR_TEXT if "987654" in hit.chunk.text else PUBLIC_TEXT
            out.setdefault(text, set()).add(tuple(hit.chunk.acl_groups))
    return out


def _check(index: IndexAdapter, embedder: HashEmbedder) -> None:
    labels = _labels(index, embedder)
    assert labels.get(HR_TEXT, {("hr",)}) == {("hr",)}, "HR's text readable under another ACL"
    assert labels.get(PUBLIC_TEXT, {(PUBLIC_GROUP,)}) == {(PUBLIC_GROUP,)}


def _race(steps: list[tuple[str, str]], parse_process: str) -> None:
    """Each step: the corpus as laid out at first, one run with one swap at one stage, the invariant.
    Runs share one index, so later runs also meet what earlier ones indexed."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cfg = Settings(data_dir=base / "data", secrets_dir=base / "secrets")
        cfg = cfg.model_copy(update={"ingest": cfg.ingest.model_copy(update={"parse_process": parse_process})})
        embedder = HashEmbedder()
        index = build_index(cfg, embedder)
        docs = base / "docs"
        try:
            for stage, swap in steps:
                _fresh(docs)
                with _swap_at(stage, partial(SWAPS[swap], docs)):
                    report = run_ingest(cfg, IngestOptions(paths=(docs,)), embedder=embedder, index=index)
                assert report.error is None
                assert {f["reason"] for f in report.failed} <= {CHANGED}, report.failed
                _check(index, embedder)
            # Nothing moves now: the next run picks up every file that a swap caught.
            _fresh(docs)
            report = run_ingest(cfg, IngestOptions(paths=(docs,)), embedder=embedder, index=index)
            assert report.failed == [] and report.error is None
            _check(index, embedder)
            files = {p for p in docs.rglob("*") if p.is_file() and p.name != ACL_FILE}
            assert files <= {Path(r.extra["path"]) for r in index.list_documents()}
        finally:
            index.close()


def _fresh(docs: Path) -> None:
    shutil.rmtree(docs, ignore_errors=True)
    _corpus(docs)


_STEPS = st.lists(st.tuples(st.sampled_from(STAGES), st.sampled_from(sorted(SWAPS))), min_size=1, max_size=3)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_STEPS)
def test_no_rename_at_any_stage_relabels_content(steps: list[tuple[str, str]]) -> None:
    _race(steps, "off")


@pytest.mark.slow
@pytest.mark.parametrize("swap", ["exchange hr and pub", "pub replaced by a link to hr"])
def test_no_rename_relabels_content_read_by_the_parse_process(swap: str) -> None:
    """The parse process opens each file relative to the folder descriptors it inherited."""
    _race([("as parsing starts", swap), ("after planning", swap)], "all")


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_each_swap_at_each_stage_is_reported_as_changed(stage: str, swap: str) -> None:
    """Every stage and swap, once each, with the first run catching it (nothing indexed yet)."""
    _race([(stage, swap)], "off")
