"""Reading a planned file: the file the plan saw, a regular one, in the folder whose ACL was resolved.

Between discovery, the plan and the read, anyone who can write a folder of the corpus can swap a
file for a symlink (to another folder's document, or to any file the job can read, such as its own
mounted secrets), for a FIFO (which would block the run), or rename, swap or replace a folder on
the path. Reading by path would follow all of these, and index what it found under the ACL of the
folder the file was planned in. So every read opens the file's name relative to its folder's
descriptor, held since discovery (``ingest.discover.folders``), without following a final link and
without blocking, and then checks the open file itself: a regular file, still at the planned path
(``/proc/self/fd``: a folder on the path renamed or swapped since), and, at the read that indexes
it, the same file (device, inode, ctime) the plan hashed. Anything else is refused as a file that
changed during the ingest; the next run sees it as it is then. The bytes read always come from the
folder the ACL was resolved for, whatever is renamed when.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ingest.model import FileRejected

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_PROC_FD = Path("/proc/self/fd")
CHANGED = (
    "the file changed during the ingest (it, or a folder on its path, was replaced, renamed or linked after it "
    "was found): run again"
)


class FileIdentity(NamedTuple):
    device: int
    inode: int  # a deleted file's inode number is often given straight to the next new file, so also:
    changed_ns: int  # st_ctime_ns, which every change to the inode moves and no caller can set


class OpenedFile(NamedTuple):
    fd: int
    identity: FileIdentity
    size: int


@contextlib.contextmanager
def open_planned(path: Path, expected: FileIdentity | None = None, dir_fd: int | None = None) -> Iterator[OpenedFile]:
    """Open ``path`` for reading as described above (its name relative to ``dir_fd``, the folder held since
    discovery; by path only without one); raises FileRejected (or OSError from the open)."""
    try:
        fd = os.open(path.name if dir_fd is not None else path, _FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP: the name is now a symlink; ENOENT in a held folder: the file, or the folder, went since it was found.
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOENT and dir_fd is not None):
            raise FileRejected(CHANGED) from None
        raise
    try:
        info = os.fstat(fd)
        identity = FileIdentity(info.st_dev, info.st_ino, info.st_ctime_ns)
        if not stat.S_ISREG(info.st_mode) or (expected is not None and identity != expected):
            raise FileRejected(CHANGED)
        if _PROC_FD.is_dir() and (_PROC_FD / str(fd)).readlink() != path:
            raise FileRejected(CHANGED)  # a folder on the path was renamed, or swapped for a link
        yield OpenedFile(fd, identity, info.st_size)
    finally:
        os.close(fd)


def read_all(opened: OpenedFile, limit: int) -> bytes:
    """The whole file, but never more than ``limit + 1`` bytes (the caller tells a too-large one)."""
    parts: list[bytes] = []
    total = 0
    while total <= limit:
        block = os.read(opened.fd, min(1 << 20, limit + 1 - total))
        if not block:
            break
        parts.append(block)
        total += len(block)
    return b"".join(parts)
