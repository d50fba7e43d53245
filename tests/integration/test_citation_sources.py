"""Citations a person can find: ``source`` names the ingest root's folder, then the path under it.

The reviewers' case: two roots that each hold ``notes.txt`` were both cited as ``notes.txt``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from docquery.core.domain import AclFilter
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]

# (root folder, path under it, what citations must show)
LAYOUTS = [
    ("handbook", "notes.txt", "handbook/notes.txt"),
    ("wiki", "notes.txt", "wiki/notes.txt"),
    ("wiki", "team/notes.txt", "wiki/team/notes.txt"),
    ("Archive 2024", "notes.txt", "Archive 2024/notes.txt"),
    ("ünïcode", "dir/notes.txt", "ünïcode/dir/notes.txt"),
]


def _sources(env: IngestEnv) -> dict[str, str]:
    hits = asyncio.run(
        env.index.search(dense=None, text="quarterly", acl=AclFilter.for_groups({"staff"}), limit=20, mode="sparse")
    )
    return {h.chunk.text.split(":")[0]: h.chunk.source for h in hits}


def test_two_roots_with_the_same_file_name_are_cited_apart(ingest_env: IngestEnv, tmp_path: Path) -> None:
    roots = []
    for i, (root, rel, _) in enumerate(LAYOUTS):
        folder = tmp_path / f"r{i}" / root
        write(folder / rel, f"doc{i}: the quarterly review moves to Thursday.\n")
        roots.append(folder)
    report = ingest_env.run(*roots)
    assert report.added == len(LAYOUTS)
    sources = _sources(ingest_env)
    assert sources == {f"doc{i}": cited for i, (_, _, cited) in enumerate(LAYOUTS)}
    records = {r.source for r in ingest_env.index.list_documents()}
    assert records == {cited for _, _, cited in LAYOUTS}


def test_a_file_given_directly_is_cited_under_its_folder(ingest_env: IngestEnv) -> None:
    write(ingest_env.docs / "notes.txt", "doc: the quarterly review moves to Thursday.\n")
    ingest_env.run(ingest_env.docs / "notes.txt")
    assert _sources(ingest_env) == {"doc": "docs/notes.txt"}


@pytest.mark.parametrize("again", [1, 2])
def test_re_ingest_is_unchanged_with_the_new_source(ingest_env: IngestEnv, again: int) -> None:
    write(ingest_env.docs / "notes.txt", "doc: the quarterly review moves to Thursday.\n")
    ingest_env.run()
    for _ in range(again):
        report = ingest_env.run()
        assert (report.added, report.updated, report.unchanged) == (0, 0, 1)
