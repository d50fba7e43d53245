"""The folders of a run, held open from discovery to the last read.

Each folder is opened once, relative to its parent's descriptor, with ``O_DIRECTORY | O_NOFOLLOW``
(a component swapped for a link is refused, never followed), and stays open until the run ends.
Listing a folder, reading its ACL file and opening its documents all go through that descriptor, so
the bytes indexed come from the very folder whose ACL was resolved: renaming or swapping a folder on
the path after discovery changes nothing those reads see, and an open folder's inode cannot be
freed and reused. Each costs one descriptor for the run, so the open-files limit is raised to its
hard limit; a folder past it is reported as one that cannot be listed.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def raise_open_files_limit() -> None:
    """The soft open-files limit up to the hard one: a held descriptor per folder of the corpus."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _close_all(fds: dict[Path, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


class Folders:
    """Real folder path -> a descriptor held for the run. Closed by ``close`` (or when collected)."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    def fd(self, folder: Path) -> int | None:
        return self._fds.get(folder)

    def fds(self) -> list[int]:
        return list(self._fds.values())

    def open_root(self, root: Path) -> int:
        """``root`` (a resolved path the operator gave); raises OSError."""
        if root not in self._fds:
            self._fds[root] = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        return self._fds[root]

    def open_child(self, parent: Path, name: str) -> int:
        """``parent / name`` relative to the held ``parent``; raises OSError (ELOOP/ENOTDIR for a link)."""
        path = parent / name
        if path not in self._fds:
            self._fds[path] = os.open(name, DIR_FLAGS, dir_fd=self._fds[parent])
        return self._fds[path]

    def descend(self, top: Path, folder: Path) -> int:
        """Holds every folder from ``top`` (held) down to ``folder``, one component at a time."""
        at = top
        for name in folder.relative_to(top).parts:
            self.open_child(at, name)
            at = at / name
        return self._fds[folder]

    def close(self) -> None:
        self._finalizer()
