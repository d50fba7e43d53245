"""Discovery under hostile trees: deep nesting, folders that cannot be listed, names that are not UTF-8."""

from __future__ import annotations

import contextlib
import errno
import os
import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.discover.acl import ACL_FILE, AclResolver
from ingest.discover.walk import NOT_UTF8, Discovery, Filters, Shard, discover
from tests.support.ingest_fixtures import write


def _discover(root: Path, shard: Shard | None = None, fallback: tuple[str, ...] | None = None) -> Discovery:
    return discover([root], filters=Filters(), shard=shard or Shard(), acl=AclResolver(fallback, "--groups"))


def _remove_tree(top: Path) -> None:
    """Bottom-up without recursion: shutil.rmtree and pytest's own cleanup recurse per level on 3.11,
    and a tree they cannot remove breaks every later pytest run's clean-up."""
    stack: list[tuple[str, bool]] = [(str(top), False)]
    while stack:
        path, emptied = stack.pop()
        if emptied:
            Path(path).rmdir()
            continue
        stack.append((path, True))
        with os.scandir(path) as listing:
            for e in listing:
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, False))
                else:
                    Path(e.path).unlink()


# -- deep nesting (the walk and the ACL lookup must not recurse per level) ------------------


@pytest.mark.parametrize("depth", [1, 200, 1100, 1500])
def test_deep_nesting_is_walked_with_inherited_and_nearest_acl(tmp_path: Path, depth: int) -> None:
    write(tmp_path / ACL_FILE, "groups: [staff]\n")
    try:
        deep = tmp_path
        for _ in range(depth):  # one level at a time: pathlib's mkdir(parents=True) recurses too
            deep = deep / "d"
            deep.mkdir()
        write(deep / "deep.txt", "deep")
        middle = tmp_path.joinpath(*["d"] * (depth // 2))
        write(middle / "mid.txt", "mid")
        if depth > 2:
            write(tmp_path.joinpath(*["d"] * (depth - 1)) / ACL_FILE, "groups: [hr]\n")  # nearest wins
        found = _discover(tmp_path)
        assert found.rejected == []
        by_name = {f.path.name: f.acl_groups for f in found.files}
        assert by_name["deep.txt"] == (("hr",) if depth > 2 else ("staff",))
        assert by_name["mid.txt"] == ("staff",)
    finally:
        _remove_tree(tmp_path / "d")


_NAME = st.text(alphabet=string.ascii_letters[:6] + "-_0", min_size=1, max_size=3)
_TREE = st.lists(st.lists(_NAME, min_size=1, max_size=4), min_size=1, max_size=25)


def _reference_order(rels: set[str]) -> list[str]:
    """The recursive pre-order: in each folder its files (sorted), then its subfolders (sorted)."""

    def key(rel: str) -> list[tuple[int, str]]:
        *folders, name = rel.split("/")
        return [(1, f) for f in folders] + [(0, name)]

    return sorted(rels, key=key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=_TREE)
def test_walk_order_is_the_recursive_pre_order(
    tmp_path_factory: pytest.TempPathFactory, paths: list[list[str]]
) -> None:
    root = tmp_path_factory.mktemp("tree")
    write(root / ACL_FILE, "public: true\n")
    rels: set[str] = set()
    for parts in paths:
        rel = "/".join(parts)
        if any(r.startswith(rel + "/") or rel.startswith(r + "/") for r in rels):
            continue  # a name cannot be both a file and a folder
        rels.add(rel)
        write(root / rel, rel)
    assert [f.rel for f in _discover(root).files] == _reference_order(rels)


# -- folders that cannot be listed ------------------------------------------------------------


@pytest.fixture
def unlistable(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Folder path -> errno that os.scandir raises for it (root runs the tests, so chmod cannot)."""
    broken: dict[str, int] = {}
    real = os.scandir

    def scandir(path: str | int) -> object:
        where = (
            str(Path(f"/proc/self/fd/{path}").readlink()) if isinstance(path, int) else str(path)
        )  # walked by descriptor
        if where in broken:
            code = broken[where]
            raise OSError(code, os.strerror(code), where)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    yield broken


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO, errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR])
@pytest.mark.parametrize("where", ["", "hr", "hr/deep"])
def test_a_folder_that_cannot_be_listed_is_a_failure(
    tmp_path: Path, unlistable: dict[str, int], code: int, where: str
) -> None:
    write(tmp_path / ACL_FILE, "groups: [staff]\n")
    for rel in ["a.txt", "hr/b.txt", "hr/deep/c.txt", "z/d.txt"]:
        write(tmp_path / rel, rel)
    broken = (tmp_path / where) if where else tmp_path
    unlistable[str(broken)] = code
    for shard in (Shard(), Shard(0, 2), Shard(1, 2)):  # every shard reports it: each may lose files there
        found = _discover(tmp_path, shard=shard)
        assert found.rejected == [(str(broken), f"cannot list folder ({os.strerror(code)})")]
        assert found.unlisted == [broken]
        assert all(broken not in f.path.parents for f in found.files)
    everything = {f.rel for f in _discover(tmp_path).files}
    expected = {"a.txt", "hr/b.txt", "hr/deep/c.txt", "z/d.txt"}
    assert everything == {r for r in expected if not (tmp_path / r).is_relative_to(broken)}


def test_a_real_path_too_long_is_walked_through_descriptors(tmp_path: Path) -> None:
    """Each folder is opened relative to its parent's descriptor, so no path is ever too long to list
    or to read: the deepest file is found, with the ACL of the root, and its folder is held."""
    write(tmp_path / ACL_FILE, "groups: [staff]\n")
    write(tmp_path / "top.txt", "top")
    fds = [os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)]
    names = [chr(ord("a") + i) * 250 for i in range(18)]  # 18 x 251 bytes > PATH_MAX (4096)
    try:
        for name in names:  # made through descriptors, as a share's client can
            os.mkdir(name, dir_fd=fds[-1])
            fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        os.close(os.open("lost.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fds[-1]))
        found = _discover(tmp_path)
        assert [f.rel for f in found.files] == ["top.txt", "/".join([*names, "lost.txt"])]
        assert found.rejected == [] and found.unlisted == []
        deep = found.files[1]
        assert deep.acl_groups == ("staff",) and deep.dir_fd is not None
        assert os.fstat(deep.dir_fd).st_ino == os.fstat(fds[-1]).st_ino
        found.close()
    finally:  # bottom-up through the descriptors: no path to it is short enough
        with contextlib.suppress(FileNotFoundError):
            os.unlink("lost.txt", dir_fd=fds[-1])
        for parent, name in reversed(list(zip(fds, names, strict=False))):
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(name, dir_fd=parent)
        for fd in fds:
            os.close(fd)


# -- names that are not valid UTF-8 -------------------------------------------------------------

_NOT_UTF8_NAMES = [
    b"\xff.txt",
    b"caf\xe9.txt",  # Latin-1
    b"\xc3(.md",  # a lead byte without its continuation
    b"\xed\xa0\x80.txt",  # an encoded surrogate
    b"\xc0\xaf.txt",  # an overlong "/"
    b"a\x80\x1b[31mred\n.txt",  # with a terminal escape and a newline
]


@pytest.mark.parametrize("raw", _NOT_UTF8_NAMES)
@pytest.mark.parametrize("in_folder", [False, True])
def test_a_name_that_is_not_utf8_is_one_failed_file(tmp_path: Path, raw: bytes, in_folder: bool) -> None:
    write(tmp_path / ACL_FILE, "groups: [staff]\n")
    write(tmp_path / "ok.txt", "ok")
    name = os.fsdecode(raw)  # the surrogate-escaped str Python gives such a name
    bad = tmp_path / name.removesuffix(".txt").removesuffix(".md") / "inner.txt" if in_folder else tmp_path / name
    write(bad, "text")
    found = _discover(tmp_path)
    assert [f.rel for f in found.files] == ["ok.txt"]
    assert found.rejected == [(str(bad), NOT_UTF8)]
    for n in (2, 3, 5):  # --shard: reported by exactly one shard, no crash
        reports = [_discover(tmp_path, shard=Shard(i, n)).rejected for i in range(n)]
        assert sorted(r for part in reports for r in part) == [(str(bad), NOT_UTF8)]


def test_a_root_that_is_not_utf8_fails_its_files_one_by_one(tmp_path: Path) -> None:
    root = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    write(root / "a.txt", "a")
    write(root / "b.txt", "b")
    found = _discover(root, fallback=("staff",))
    assert found.files == []
    assert [reason for _, reason in found.rejected] == [NOT_UTF8, NOT_UTF8]
