"""A planned file swapped after it was found is never read through the swap.

Anyone who can write a public folder can replace one of its files, between discovery and the read, by
a symlink to another folder's document or to any file the job can read, by a FIFO (which blocks a read
by name forever), or swap a folder on its path for a link. Each is refused as a changed file, at
whichever read it happens before: the plan's (type, size, hash) or the one that indexes the file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from docquery.core.collection import PUBLIC_GROUP
from ingest.discover.acl import ACL_FILE, AclResolver
from ingest.discover.walk import Discovery, Filters, Shard, discover
from ingest.model import FileRejected
from ingest.plan.compare import build_plan
from ingest.prepare.document import prepare
from ingest.reading import CHANGED
from tests.support.ingest_fixtures import write
from tests.support.parse_scripts import real_chunker, real_config

SECRET = "The salary of the CEO is 987654 dollars per year."
OUTSIDE = "TOP SECRET outside the corpus: the launch code is 00000000."


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    write(root / ACL_FILE, "public: true\n")
    write(root / "hr" / ACL_FILE, "groups: [hr]\n")
    write(root / "hr" / "note.txt", SECRET)
    write(root / "pub" / "note.txt", "The canteen opens at noon.")
    write(root / "pub" / "sub" / "note.txt", "Parking is free on Fridays.")
    write(tmp_path / "outside" / "note.txt", OUTSIDE)
    write(tmp_path / "outside" / "sub" / "note.txt", OUTSIDE)
    return root.resolve()


def _link_to_hr(root: Path, target: Path) -> None:
    target.unlink()
    target.symlink_to(root / "hr" / "note.txt")


def _link_outside(root: Path, target: Path) -> None:
    target.unlink()
    target.symlink_to(root.parent / "outside" / "note.txt")


def _fifo(root: Path, target: Path) -> None:
    target.unlink()
    os.mkfifo(target)


def _other_file(root: Path, target: Path) -> None:
    target.unlink()  # a new file (a new inode) where the planned one was
    shutil.copy(root / "hr" / "note.txt", target)


def _folder_link(root: Path, target: Path) -> None:
    folder = target.parent
    shutil.rmtree(folder)
    folder.symlink_to(root.parent / "outside" / "sub")  # the same name, through a linked folder


def _exchange_folders(root: Path, target: Path) -> None:
    """pub and hr trade names: each ACL file moves with its folder, so pub/note.txt is now HR's."""
    (root / "pub").rename(root / "swap")
    (root / "hr").rename(root / "pub")
    (root / "swap").rename(root / "hr")


def _replace_folder(root: Path, target: Path) -> None:
    """A new folder at pub's name holding HR's document, the old one renamed away."""
    write(root / "pub-new" / "note.txt", SECRET)
    write(root / "pub-new" / "sub" / "note.txt", SECRET)
    (root / "pub").rename(root / "pub-old")
    (root / "pub-new").rename(root / "pub")


def _rename_parent(root: Path, target: Path) -> None:
    """A folder on the path renamed away and back: the file is where it was, but was moved meanwhile."""
    (root / "pub").rename(root / "pub-moved")


SWAPS: dict[str, tuple[str, Callable[[Path, Path], None]]] = {
    "folders exchanged": ("pub/note.txt", _exchange_folders),
    "a parent folder exchanged": ("pub/sub/note.txt", _exchange_folders),
    "folder replaced by another": ("pub/note.txt", _replace_folder),
    "a parent folder replaced by another": ("pub/sub/note.txt", _replace_folder),
    "folder renamed away": ("pub/sub/note.txt", _rename_parent),
    "symlink to another folder's document": ("pub/note.txt", _link_to_hr),
    "symlink out of the corpus": ("pub/note.txt", _link_outside),
    "FIFO": ("pub/note.txt", _fifo),
    "another file at the same name": ("pub/note.txt", _other_file),
    "a folder on the path swapped for a link": ("pub/sub/note.txt", _folder_link),
}


_HELD: list[Discovery] = []


@pytest.fixture(autouse=True)
def _close_held() -> Iterator[None]:
    yield
    while _HELD:
        _HELD.pop().close()


def _discover(root: Path) -> Discovery:
    return discover([root], filters=Filters(), shard=Shard(), acl=AclResolver((PUBLIC_GROUP,), "--public"))


def _plan(found: Discovery) -> list:  # type: ignore[type-arg]
    _HELD.append(found)  # its folders stay open while the planned documents are read, as in a run
    plan = build_plan(
        found, [], pipeline_fingerprint="p", max_file_bytes=1 << 20, delete_missing=False, filters=Filters(),
        shard=Shard(),
    )  # fmt: skip
    return [plan.add, plan.failed]


@pytest.mark.parametrize("swap", list(SWAPS), ids=list(SWAPS))
def test_a_swap_after_the_plan_is_refused_at_the_read(tmp_path: Path, swap: str) -> None:
    root = _corpus(tmp_path)
    rel, act = SWAPS[swap]
    added, failed = _plan(_discover(root))
    assert not failed
    planned = next(p for p in added if p.source.rel == rel)
    act(root, root / rel)
    with pytest.raises(FileRejected) as rejected:
        prepare(planned, real_chunker(), real_config())
    assert rejected.value.reason == CHANGED


@pytest.mark.parametrize("swap", [s for s in SWAPS if s != "another file at the same name"])
def test_a_swap_after_discovery_is_refused_by_the_plan(tmp_path: Path, swap: str) -> None:
    root = _corpus(tmp_path)
    rel, act = SWAPS[swap]
    found = _discover(root)
    act(root, root / rel)
    added, failed = _plan(found)
    assert rel not in {p.source.rel for p in added}
    assert (str(root / rel), CHANGED) in failed


def test_an_unswapped_file_is_read_as_planned(tmp_path: Path) -> None:
    root = _corpus(tmp_path)
    added, failed = _plan(_discover(root))
    assert not failed and len(added) == 3
    for planned in added:
        doc = prepare(planned, real_chunker(), real_config())
        assert doc.chunks and OUTSIDE not in doc.chunks[0].text
