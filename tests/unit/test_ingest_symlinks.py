"""A document's ACL is the ACL of where its content lives, whatever links point at it.

A file symlink is replaced by its target (same path, relative path, shard and ACL as the target
reached directly); links out of the root, into dot-paths, dangling links and loops are reported
and the batch goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from docquery.core.collection import PUBLIC_GROUP
from ingest.discover.acl import ACL_FILE, AclResolver
from ingest.discover.walk import Discovery, Filters, Shard, discover
from tests.support.ingest_fixtures import write


def _corpus(root: Path) -> None:
    write(root / "hr" / ACL_FILE, "groups: [hr]\n")
    write(root / "hr" / "salaries.txt", "salaries")
    write(root / "hr" / "deep" / "reviews.txt", "reviews")  # inherits [hr]
    write(root / "finance" / ACL_FILE, "groups: [staff]\n")
    write(root / "finance" / "budget.txt", "budget")
    write(root / "open" / "readme.txt", "no ACL file: the fallback applies")


def _discover(root: Path, fallback: tuple[str, ...] = (PUBLIC_GROUP,)) -> Discovery:
    return discover([root], filters=Filters(), shard=Shard(), acl=AclResolver(fallback, "--public"))


def _acls(found: Discovery) -> dict[str, tuple[str, ...]]:
    return {f.rel: f.acl_groups for f in found.files}


EXPECTED = {
    "finance/budget.txt": ("staff",),
    "hr/deep/reviews.txt": ("hr",),
    "hr/salaries.txt": ("hr",),
    "open/readme.txt": (PUBLIC_GROUP,),
}

# (link path, target as written in the link): every one points inside the root at a real file.
LINKS_IN_ROOT = [
    ("finance/shortcut.txt", "../hr/salaries.txt"),  # the review's reproduction
    ("shortcut.txt", "hr/salaries.txt"),  # root level, under --public: the review's second one
    ("finance/a-first.txt", "../hr/salaries.txt"),  # sorts before budget.txt and before hr/
    ("finance/zz.txt", "../hr/deep/reviews.txt"),  # into an inherited ACL
    ("hr/budget-link.txt", "../finance/budget.txt"),  # the other way round
    ("open/hr.txt", "../hr/salaries.txt"),  # from a fallback-covered folder
    ("open/deep/x/y.txt", "../../../hr/salaries.txt"),
    ("finance/abs.txt", "<abs>/hr/salaries.txt"),  # absolute target
    ("finance/chain.txt", "../shortcut-1.txt"),  # a link to a link (shortcut-1.txt -> hr/...)
    ("hr/self-folder.txt", "./salaries.txt"),
    ("a.txt", "open/readme.txt"),
]


@pytest.mark.parametrize(("link", "target"), LINKS_IN_ROOT)
def test_a_link_never_relabels_its_target(tmp_path: Path, link: str, target: str) -> None:
    root = tmp_path / "corpus"
    _corpus(root)
    (root / "shortcut-1.txt").symlink_to("hr/salaries.txt")
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(target.replace("<abs>", str(root)))
    found = _discover(root)
    assert _acls(found) == EXPECTED, "the link added, dropped or relabelled a document"
    assert found.rejected == []
    # Each document is its real file, once.
    assert sorted(f.path for f in found.files) == sorted(root / rel for rel in EXPECTED)


@pytest.mark.parametrize("fallback", [(PUBLIC_GROUP,), ("staff",), ("everyone",)])
def test_the_fallback_never_reaches_a_linked_document(tmp_path: Path, fallback: tuple[str, ...]) -> None:
    root = tmp_path / "corpus"
    _corpus(root)
    (root / "shortcut.txt").symlink_to("hr/salaries.txt")
    assert _acls(_discover(root, fallback))["hr/salaries.txt"] == ("hr",)


def _loop_self(root: Path) -> None:
    (root / "loop.txt").symlink_to("loop.txt")


def _loop_pair(root: Path) -> None:
    (root / "a.txt").symlink_to("b.txt")
    (root / "b.txt").symlink_to("a.txt")


def _loop_deep(root: Path) -> None:
    (root / "hr" / "x.txt").symlink_to("../finance/y.txt")
    (root / "finance" / "y.txt").symlink_to("../hr/x.txt")


def _loop_folder(root: Path) -> None:
    (root / "hr" / "again").symlink_to(".", target_is_directory=True)


def _loop_folder_pair(root: Path) -> None:
    (root / "l1").symlink_to("l2")
    (root / "l2").symlink_to("l1")


def _dangling(root: Path) -> None:
    (root / "finance" / "gone.txt").symlink_to("../nowhere.txt")


def _outside(root: Path) -> None:
    write(root.parent / "outside.txt", "secret")
    (root / "finance" / "out.txt").symlink_to("../../outside.txt")


def _into_dot(root: Path) -> None:
    write(root / ".git" / "config", "[core]")
    (root / "finance" / "cfg.txt").symlink_to("../.git/config")


def _to_folder(root: Path) -> None:
    (root / "finance" / "hr-folder.txt").symlink_to("../hr")


BAD_LINKS: list[tuple[Callable[[Path], None], str]] = [
    (_loop_self, "symlink loop"),
    (_loop_pair, "symlink loop"),
    (_loop_deep, "symlink loop"),
    (_loop_folder, ""),  # a folder link: skipped, never followed
    (_loop_folder_pair, "symlink loop"),
    (_dangling, "dangling symlink"),
    (_outside, "symlink points outside the ingest root"),
    (_into_dot, "dot-file or dot-folder"),
    (_to_folder, ""),
]


@pytest.mark.parametrize(("make", "reason"), BAD_LINKS, ids=[m.__name__ for m, _ in BAD_LINKS])
def test_bad_links_are_reported_and_the_batch_goes_on(
    tmp_path: Path, make: Callable[[Path], None], reason: str
) -> None:
    root = tmp_path / "corpus"
    _corpus(root)
    make(root)
    found = _discover(root)
    assert _acls(found) == EXPECTED
    if reason:
        assert found.rejected and all(reason in why for _, why in found.rejected), found.rejected
    else:
        assert found.rejected == []
        assert [why for _, why in found.skipped] == ["symlinked folder (not followed)"]


def test_a_link_is_sharded_and_filtered_as_its_target(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _corpus(root)
    (root / "finance" / "shortcut.txt").symlink_to("../hr/salaries.txt")
    for n in (2, 3, 5):
        owners = [i for i in range(n) if "hr/salaries.txt" in _acls(
            discover([root], filters=Filters(), shard=Shard(i, n), acl=AclResolver(("g",), "")))]  # fmt: skip
        assert len(owners) == 1, "the document would be indexed by two shards (or none)"
    only_finance = discover([root], filters=Filters(include=("finance/*",)), shard=Shard(), acl=AclResolver(None, ""))
    assert _acls(only_finance) == {"finance/budget.txt": ("staff",)}


def test_a_given_path_that_loops_is_a_usage_error(tmp_path: Path) -> None:
    from ingest.model import UsageError

    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(UsageError, match="symlink loop"):
        discover([tmp_path / "loop"], filters=Filters(), shard=Shard(), acl=AclResolver(("g",), "--groups"))
    assert (tmp_path / "loop").is_symlink()
