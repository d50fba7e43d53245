"""Discovery: globs, deterministic shards with no overlap and no gap, per-folder ACL files."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from docquery.core.collection import PUBLIC_GROUP
from ingest.discover.acl import ACL_FILE, AclResolver
from ingest.discover.walk import Filters, Shard, discover, parse_shard, shard_of
from ingest.model import UsageError
from tests.support.ingest_fixtures import write


def _tree(root: Path) -> None:
    write(root / ACL_FILE, "groups: [staff]\n")
    for rel in ["a.md", "b.txt", "drafts/c.md", "drafts/deep/d.txt", "img/e.png", ".git/config", ".hidden.md"]:
        write(root / rel, rel)


def _rels(root: Path, **kw: object) -> list[str]:
    filters = kw.pop("filters", Filters())
    shard = kw.pop("shard", Shard())
    found = discover([root], filters=filters, shard=shard, acl=AclResolver(None, ""))  # type: ignore[arg-type]
    return [f.rel for f in found.files]


def test_walk_is_sorted_and_skips_dot_entries(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _rels(tmp_path) == ["a.md", "b.txt", "drafts/c.md", "drafts/deep/d.txt", "img/e.png"]


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (("*.md",), (), ["a.md", "drafts/c.md"]),
        ((), ("drafts/*",), ["a.md", "b.txt", "img/e.png"]),
        (("*.md", "*.txt"), ("drafts/deep/*",), ["a.md", "b.txt", "drafts/c.md"]),
        (("drafts/*",), ("*.txt",), ["drafts/c.md"]),
    ],
)
def test_include_exclude(
    tmp_path: Path, include: tuple[str, ...], exclude: tuple[str, ...], expected: list[str]
) -> None:
    _tree(tmp_path)
    assert _rels(tmp_path, filters=Filters(include, exclude)) == expected


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_cover_everything_once(tmp_path: Path, n: int) -> None:
    for i in range(60):
        write(tmp_path / f"dir{i % 4}" / f"f{i}.txt", "x")
    write(tmp_path / ACL_FILE, "public: true\n")
    everything = _rels(tmp_path)
    parts = [_rels(tmp_path, shard=Shard(i, n)) for i in range(n)]
    union = [r for p in parts for r in p]
    assert sorted(union) == sorted(everything) and len(union) == len(set(union))
    if n > 1:
        assert all(parts), "every shard gets some of 60 files"
    # Deterministic: the shard depends only on the relative path.
    assert [shard_of(r, n) for r in everything] == [shard_of(r, n) for r in everything]


def test_parse_shard_forms() -> None:
    assert parse_shard("2/4") == Shard(2, 4)
    assert parse_shard(None) == Shard(0, 1)
    for ref in ("$JOB_COMPLETION_INDEX/3", "${JOB_COMPLETION_INDEX}/3", "$(JOB_COMPLETION_INDEX)/3"):
        assert parse_shard(ref, {"JOB_COMPLETION_INDEX": "1"}) == Shard(1, 3)
    for bad in ("4/4", "-1/2", "a/b", "1", "0/0", "$UNSET/2"):
        with pytest.raises(UsageError):
            parse_shard(bad, {})


def test_acl_nearest_file_wins_and_is_inherited(tmp_path: Path) -> None:
    write(tmp_path / ACL_FILE, "groups: [staff, hr]\n")
    write(tmp_path / "sec" / ACL_FILE, "groups: [security]\n")
    write(tmp_path / "pub" / ACL_FILE, "public: true\n")
    for rel in ["top.md", "sec/a.md", "sec/inner/b.md", "pub/c.md", "other/d.md"]:
        write(tmp_path / rel, "x")
    found = discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver(("fallback",), "--groups"))
    acl = {f.rel: f.acl_groups for f in found.files}
    assert acl == {
        "top.md": ("hr", "staff"),
        "sec/a.md": ("security",),
        "sec/inner/b.md": ("security",),
        "pub/c.md": (PUBLIC_GROUP,),
        "other/d.md": ("hr", "staff"),
    }
    # The PATH given is the ACL root: a folder file above it decides nothing, the fallback applies.
    found = discover([tmp_path / "other"], filters=Filters(), shard=Shard(), acl=AclResolver(("fallback",), "--groups"))
    assert [(f.rel, f.acl_groups, f.acl_origin) for f in found.files] == [("d.md", ("fallback",), "--groups")]
    # A declared root above the PATH: the file there applies, named relative to the root.
    acl = AclResolver(("fallback",), "--groups", root=tmp_path)
    found = discover([tmp_path / "other"], filters=Filters(), shard=Shard(), acl=acl)
    assert [(f.rel, f.acl_groups, f.acl_origin) for f in found.files] == [("d.md", ("hr", "staff"), ACL_FILE)]


def _hr_share(tmp_path: Path) -> Path:
    """share/hr is [hr] (a file two levels up from its documents), share/pub is public and holds links into hr."""
    share = tmp_path / "share"
    write(share / "hr" / ACL_FILE, "groups: [hr]\n")
    write(share / "hr" / "reviews" / "bob.txt", "review")
    write(share / "hr" / "reviews" / "deep" / "alice.txt", "review")
    write(share / "pub" / ACL_FILE, "public: true\n")
    write(share / "pub" / "faq.txt", "faq")
    (share / "pub" / "dirlink").symlink_to("../hr/reviews")
    (share / "pub" / "filelink.txt").symlink_to("../hr/reviews/bob.txt")
    return share


# Every way a run can be pointed at HR's documents (a link given as PATH, or a
# subfolder given before its parent, put them under --public): each must leave them [hr].
HR_PATHS = [
    ["hr"],
    ["hr/reviews"],
    ["hr/reviews/deep"],
    ["hr/reviews/bob.txt"],
    ["pub/dirlink"],
    ["pub/filelink.txt"],
    ["pub/dirlink/deep"],
    ["pub/dirlink/bob.txt"],
    ["pub/dirlink", "pub"],
    ["pub", "pub/dirlink"],
    ["hr/reviews", "hr"],
    ["hr", "hr/reviews"],
    ["pub/faq.txt", "pub/dirlink", "pub/filelink.txt"],
]


@pytest.mark.parametrize("paths", HR_PATHS, ids=["+".join(p) for p in HR_PATHS])
@pytest.mark.parametrize("fallback", [(PUBLIC_GROUP,), ("staff",)], ids=["--public", "--groups staff"])
def test_the_path_given_never_changes_a_documents_acl(
    tmp_path: Path, paths: list[str], fallback: tuple[str, ...]
) -> None:
    share = _hr_share(tmp_path)
    resolver = AclResolver(fallback, "--x", root=share)
    found = discover([share / p for p in paths], filters=Filters(), shard=Shard(), acl=resolver)
    acl = {f.path.name: (f.acl_groups, f.acl_origin) for f in found.files}
    hr = (("hr",), f"hr/{ACL_FILE}")
    assert {name: acl[name] for name in acl if name != "faq.txt"} == {name: hr for name in acl if name != "faq.txt"}
    assert any(name in acl for name in ("bob.txt", "alice.txt"))
    assert acl.get("faq.txt", ((PUBLIC_GROUP,), f"pub/{ACL_FILE}")) == ((PUBLIC_GROUP,), f"pub/{ACL_FILE}")


# Paths given together without a declared root: the outermost bounds the lookup, whatever the order.
NESTED_PATHS = [["hr/reviews", "hr"], ["hr", "hr/reviews"], ["hr/reviews/deep", "hr/reviews/bob.txt", "hr"]]


@pytest.mark.parametrize("paths", NESTED_PATHS, ids=["+".join(p) for p in NESTED_PATHS])
def test_the_order_of_nested_paths_never_changes_an_acl(tmp_path: Path, paths: list[str]) -> None:
    share = _hr_share(tmp_path)
    found = discover([share / p for p in paths], filters=Filters(), shard=Shard(), acl=AclResolver(("x",), "--x"))
    assert {f.path.name: (f.acl_groups, f.acl_origin) for f in found.files} == {
        "bob.txt": (("hr",), ACL_FILE),
        "alice.txt": (("hr",), ACL_FILE),
    }


@pytest.mark.parametrize("paths", [["pub"], ["hr", "pub"], ["hr/reviews"]])
def test_a_path_outside_the_declared_root_is_a_usage_error(tmp_path: Path, paths: list[str]) -> None:
    share = _hr_share(tmp_path)
    acl = AclResolver(("x",), "--x", root=share / "hr")
    if paths == ["hr/reviews"]:  # inside: fine
        assert discover([share / p for p in paths], filters=Filters(), shard=Shard(), acl=acl).files
        return
    with pytest.raises(UsageError, match=r"pub is outside the ACL root .*hr \(--acl-root"):
        discover([share / p for p in paths], filters=Filters(), shard=Shard(), acl=acl)


def test_a_link_given_as_path_resolves_against_the_declared_root(tmp_path: Path) -> None:
    share = _hr_share(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "to-hr").symlink_to(share / "hr" / "reviews")
    acl = AclResolver((PUBLIC_GROUP,), "--public", root=share)
    found = discover([outside / "to-hr"], filters=Filters(), shard=Shard(), acl=acl)
    assert {(f.acl_groups, f.acl_origin) for f in found.files} == {(("hr",), f"hr/{ACL_FILE}")}
    (outside / "to-pub").symlink_to(share.parent)  # resolves above the root
    with pytest.raises(UsageError, match="outside the ACL root"):
        discover([outside / "to-pub"], filters=Filters(), shard=Shard(), acl=AclResolver(("x",), "--x", root=share))


def test_a_folder_whose_acl_file_cannot_be_looked_up_fails_its_subtree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name too long to look up is "cannot tell", not "no ACL file": a shorter file name in the same
    folder can still be read, so it must not fall back to the folder above; the rest goes on."""
    import errno
    import os

    write(tmp_path / ACL_FILE, "public: true\n")
    write(tmp_path / "hr" / "s.txt", "secret")
    write(tmp_path / "pub" / "p.txt", "public")
    real_stat = os.stat

    def stat(path: object, *args: object, dir_fd: int | None = None, **kwargs: object) -> os.stat_result:
        where = Path(f"/proc/self/fd/{dir_fd}").readlink() / str(path) if dir_fd is not None else Path(str(path))
        if where == tmp_path / "hr" / ACL_FILE:  # looked up through the held folder, as discovery does
            raise OSError(errno.ENAMETOOLONG, "File name too long")
        return real_stat(path, *args, dir_fd=dir_fd, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    found = discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver(None, ""))
    assert [f.rel for f in found.files] == ["pub/p.txt"]
    reasons = dict(found.rejected)
    assert (
        "not indexed: the ACL file that governs it (hr/.docquery-acl.yaml) is refused"
        in reasons[str(tmp_path / "hr" / "s.txt")]
    )
    assert reasons[str(tmp_path / "hr")].startswith(f"cannot tell whether {tmp_path / 'hr'} has an ACL file")


@pytest.mark.parametrize(
    "content",
    ["groups: []\n", "public: yes-please\n", "groups: [a]\npublic: true\n", "owners: [a]\n", "groups: [__public__]\n",
     "- a\n- b\n", "groups: [a\n", "groups: ['has space']\n"],
)  # fmt: skip
def test_invalid_acl_files_fail_their_subtree_only(tmp_path: Path, content: str) -> None:
    write(tmp_path / "bad" / ACL_FILE, content)
    write(tmp_path / "bad" / "a.md", "x")
    write(tmp_path / "bad" / "deep" / "b.md", "x")
    write(tmp_path / "bad" / "fixed" / ACL_FILE, "groups: [g2]\n")  # a deeper valid file still decides below it
    write(tmp_path / "bad" / "fixed" / "c.md", "x")
    write(tmp_path / "good" / "d.md", "x")
    found = discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver(("g",), "--groups"))
    assert {f.rel: f.acl_groups for f in found.files} == {"bad/fixed/c.md": ("g2",), "good/d.md": ("g",)}
    reasons = dict(found.rejected)
    assert set(reasons) == {str(tmp_path / "bad" / p) for p in ("a.md", "deep/b.md", ACL_FILE)}
    problem = reasons[str(tmp_path / "bad" / ACL_FILE)]
    assert problem == _problem_of(content), "the ACL file is reported once, with the schema's own message"
    assert reasons[str(tmp_path / "bad" / "a.md")].startswith("not indexed: the ACL file that governs it (bad/")


def _problem_of(content: str) -> str:
    from ingest.discover.acl import read_acl_file

    probe = write(Path(tempfile.mkdtemp()) / ACL_FILE, content)
    with pytest.raises(UsageError) as caught:
        read_acl_file(probe)
    return str(caught.value).removeprefix(f"{probe}: ")


def test_files_without_any_acl_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "covered" / ACL_FILE, "groups: [a]\n")
    write(tmp_path / "covered" / "x.md", "x")
    write(tmp_path / "bare" / "y.md", "y")
    with pytest.raises(UsageError, match=r"no ACL for 1 file\(s\) \(bare/y.md\)"):
        discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver(None, ""))


@pytest.mark.parametrize("name", ["logo.png", "Thumbs.db", "setup.EXE", "photo.jpeg", "archive.tar.gz", "a.b.c.zip"])
def test_a_file_no_loader_reads_needs_no_acl(tmp_path: Path, name: str) -> None:
    # A stray image at the root of a tree labelled folder by folder is skipped, as it would be with an ACL.
    write(tmp_path / "covered" / ACL_FILE, "groups: [a]\n")
    write(tmp_path / "covered" / "x.md", "x")
    write(tmp_path / name, "\x89PNG binary")
    found = discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver(None, ""))
    assert [f.rel for f in found.files] == ["covered/x.md"]
    assert found.skipped == [(str(tmp_path.resolve() / name), f"unsupported file type {Path(name).suffix.lower()!r}")]


@pytest.mark.parametrize("name", ["README", "notes.rst", "y.md", "page.HTML", "doc.pdf", "memo.docx"])
def test_a_file_that_may_be_read_still_needs_an_acl(tmp_path: Path, name: str) -> None:
    write(tmp_path / name, "text")
    with pytest.raises(UsageError, match=r"no ACL for 1 file\(s\)"):
        discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver(None, ""))


def test_symlink_outside_root_is_rejected(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.txt", "s")
    root = tmp_path / "root"
    write(root / "ok.txt", "ok")
    (root / "link.txt").symlink_to(outside)
    found = discover([root], filters=Filters(), shard=Shard(), acl=AclResolver(("g",), "--groups"))
    assert [f.rel for f in found.files] == ["ok.txt"]
    assert found.rejected == [(str(root / "link.txt"), "symlink points outside the ingest root")]


def test_examples_corpus_carries_its_own_acls() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    found = discover([examples], filters=Filters(), shard=Shard(), acl=AclResolver(None, ""))
    by_folder = {f.rel.split("/")[0]: f.acl_groups for f in found.files}
    assert by_folder == {"handbook": ("staff",), "security": ("security",), "public": (PUBLIC_GROUP,)}


def test_links_fifos_and_overlapping_paths(tmp_path: Path) -> None:
    """Pinned edge cases of the walk: each real file is indexed once, as itself (a link is its
    target); folder links are not followed (skipped); anything but a regular file is reported."""
    import os

    root = tmp_path / "root"
    write(root / "c.txt", "c")
    write(root / "sub" / "d.txt", "d")
    write(tmp_path / "elsewhere" / "e.txt", "e")
    (root / "b-link.txt").symlink_to(root / "c.txt")  # sorts first, but the document is c.txt
    (root / "z-link.txt").symlink_to(root / "sub" / "d.txt")  # reached before sub/: still sub/d.txt
    (root / "linked-dir").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (root / "dangling.txt").symlink_to(root / "gone.txt")
    os.mkfifo(root / "pipe.txt")
    found = discover([root, root / "sub"], filters=Filters(), shard=Shard(), acl=AclResolver(("g",), "--groups"))
    assert [(f.rel, f.path) for f in found.files] == [
        ("c.txt", root / "c.txt"),
        ("sub/d.txt", root / "sub" / "d.txt"),
    ]
    assert found.rejected == [
        (str(root / "dangling.txt"), "dangling symlink (its target does not exist)"),
        (str(root / "pipe.txt"), "not a regular file"),
    ]
    assert found.skipped == [(str(root / "linked-dir"), "symlinked folder (not followed)")]
    assert found.roots == [root, root / "sub"]


def test_a_file_given_directly_is_indexed_by_its_real_path(tmp_path: Path) -> None:
    target = write(tmp_path / "docs" / "a.txt", "a")
    (tmp_path / "alias.txt").symlink_to(target)
    found = discover([tmp_path / "alias.txt"], filters=Filters(), shard=Shard(), acl=AclResolver(("g",), "--groups"))
    assert [(f.rel, f.path, f.root) for f in found.files] == [("a.txt", target, target.parent)]
