"""``--include``/``--exclude`` match the way docs/ingestion.md says: its table is checked against the code,
plus a table of variants through discovery itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingest.discover.acl import AclResolver
from ingest.discover.walk import Filters, Shard, discover, glob_match

DOC = Path(__file__).resolve().parents[2] / "docs" / "ingestion.md"


def _doc_table() -> list[tuple[str, str, bool]]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- glob-table -->", 1)[1].split("<!-- /glob-table -->", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| (yes|no) \|$", table, re.M)
    assert len(rows) >= 10, "the glob table in docs/ingestion.md is missing"
    return [(glob, rel, answer == "yes") for glob, rel, answer in rows]


@pytest.mark.parametrize(("glob", "rel", "expected"), _doc_table())
def test_the_documented_examples(glob: str, rel: str, expected: bool) -> None:
    assert glob_match(glob, rel) is expected


TREE = [
    "a.md",
    "b.txt",
    "README.MD",
    "drafts/c.md",
    "drafts/deep/d.txt",
    "team/drafts/e.md",
    "docs/f.md",
    "docs/x/g.md",
]


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (("*.md",), (), ["a.md", "docs/f.md", "docs/x/g.md", "drafts/c.md", "team/drafts/e.md"]),
        ((), ("drafts",), ["README.MD", "a.md", "b.txt", "docs/f.md", "docs/x/g.md"]),
        ((), ("drafts/",), ["README.MD", "a.md", "b.txt", "docs/f.md", "docs/x/g.md"]),
        (
            (),
            ("drafts/deep",),
            ["README.MD", "a.md", "b.txt", "docs/f.md", "docs/x/g.md", "drafts/c.md", "team/drafts/e.md"],
        ),
        (("docs/**/*.md",), (), ["docs/f.md", "docs/x/g.md"]),
        (("docs/*",), (), ["docs/f.md", "docs/x/g.md"]),
        (("./docs/*.md",), (), ["docs/f.md", "docs/x/g.md"]),
        (
            ("*.md", "*.txt"),
            ("drafts/deep/*",),
            ["a.md", "b.txt", "docs/f.md", "docs/x/g.md", "drafts/c.md", "team/drafts/e.md"],
        ),
        (("*.MD",), (), ["README.MD"]),
        (("*.md",), ("team",), ["a.md", "docs/f.md", "docs/x/g.md", "drafts/c.md"]),
        (("nothing-*",), (), []),
    ],
)
def test_filters_through_discovery(
    tmp_path: Path, include: tuple[str, ...], exclude: tuple[str, ...], expected: list[str]
) -> None:
    for rel in TREE:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    found = discover([tmp_path], filters=Filters(include, exclude), shard=Shard(), acl=AclResolver(("g",), "--groups"))
    assert sorted(f.rel for f in found.files) == expected
