"""Reading a planned file: the file the plan saw, a regular one, reached by the path it was found at.

Between discovery, the plan and the read, anyone who can write a folder of the corpus can swap a
file for a symlink (to another folder's document, or to any file the job can read, such as its own
mounted secrets), for a FIFO (which would block the run), or swap a folder on the path for a link.
Reading by name would follow all of these, and index what it found under the ACL of the folder the
file was planned in. So every read opens the path without following a final link and without
blocking, and then checks the open file itself: a regular file, whose real path (``/proc/self/fd``)
is the planned path, and, at the read that indexes it, the same file (device and inode) the plan
hashed, unchanged since. Anything else is refused as a file that changed during the ingest; the next run sees it as
it is then.
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
CHANGED = "the file changed during the ingest (replaced by a link or another file after it was planned): run again"


class FileIdentity(NamedTuple):
    device: int
    inode: int  # a deleted file's inode number is often given straight to the next new file, so also:
    changed_ns: int  # st_ctime_ns, which every change to the inode moves and no caller can set


class OpenedFile(NamedTuple):
    fd: int
    identity: FileIdentity
    size: int


@contextlib.contextmanager
def open_planned(path: Path, expected: FileIdentity | None = None) -> Iterator[OpenedFile]:
    """Open ``path`` for reading as described above; raises FileRejected (or OSError from the open)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the planned path is now a symlink
            raise FileRejected(CHANGED) from None
        raise
    try:
        info = os.fstat(fd)
        identity = FileIdentity(info.st_dev, info.st_ino, info.st_ctime_ns)
        if not stat.S_ISREG(info.st_mode) or (expected is not None and identity != expected):
            raise FileRejected(CHANGED)
        if _PROC_FD.is_dir() and (_PROC_FD / str(fd)).readlink() != path:
            raise FileRejected(CHANGED)  # a folder on the path was swapped for a link
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
