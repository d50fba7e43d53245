"""Checks the CLI runs before the expensive start (model load, app build): can the data dir be used,
is the index free, is the port free.

Each failure is a ``ConfigError`` (exit 2) or a ``BusyError`` (exit 3) whose message says
what is wrong and what to do, so the command prints one line instead of failing later
with an engine traceback.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from docquery.config.settings import Settings
from docquery.core.collection import COLLECTION_NAME_RULE, is_valid_collection_name
from docquery.core.errors import BusyError, ConfigError


@dataclass(frozen=True)
class EdgeCollection:
    name: str
    path: Path

    @property
    def exists(self) -> bool:
        return (self.path / "edge_config.json").exists()


def edge_collection(settings: Settings, name: str | None = None) -> EdgeCollection | None:
    """The embedded collection's location, or None when a Qdrant server is configured."""
    if settings.qdrant.url:
        return None
    collection = name or settings.qdrant.collection
    if not is_valid_collection_name(collection):  # the flags and the settings check it first; a path must never escape
        raise ConfigError(f"the collection name must be {COLLECTION_NAME_RULE}")
    return EdgeCollection(collection, settings.data_dir / "collections" / collection)


def check_data_dir(settings: Settings, collection: str | None = None) -> None:
    """Raise ConfigError when the embedded index's folders cannot be used: a file where a folder must be,
    or a folder this process may not read.

    Found by trying (stat, then listing), not by ``os.access``: root passes every access check, yet a
    container that drops CAP_DAC_OVERRIDE is refused like any other user.
    """
    edge = edge_collection(settings, collection)
    if edge is None:
        return  # a Qdrant server keeps its own files
    for path in (settings.data_dir, edge.path.parent, edge.path):
        if not _usable_folder(path, settings.data_dir):
            return  # absent: the first ingest creates it, and nothing below it exists


def _usable_folder(path: Path, data_dir: Path) -> bool:
    """True when ``path`` is a folder this process can list, False when it does not exist."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            with os.scandir(path):
                return True
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise ConfigError(
            f"DOCQUERY_DATA_DIR={data_dir}: part of the path {path} is a file, not a folder: "
            "set DOCQUERY_DATA_DIR to a folder (it is created if missing)"
        ) from None
    except PermissionError:
        raise ConfigError(
            f"DOCQUERY_DATA_DIR={data_dir}: permission denied on {path}: give the user running docquery read "
            "and write access to it (e.g. chmod -R u+rwX, or chown -R), or set DOCQUERY_DATA_DIR to another folder"
        ) from None
    except OSError as exc:  # a symlink loop, a name too long: the setting is wrong, not DocQuery
        raise ConfigError(
            f"DOCQUERY_DATA_DIR={data_dir}: cannot use {path}: {exc.strerror}; check DOCQUERY_DATA_DIR"
        ) from None
    if path == data_dir:
        raise ConfigError(
            f"DOCQUERY_DATA_DIR={data_dir} is a file, not a folder: "
            "set DOCQUERY_DATA_DIR to a folder (it is created if missing)"
        )
    raise ConfigError(
        f"{path} (in DOCQUERY_DATA_DIR={data_dir}) is a file, not a folder: "
        "move it away, or set DOCQUERY_DATA_DIR to another folder"
    )


def lock_holder(wal_dir: Path) -> int | None:
    """The pid holding qdrant-edge's lock on ``wal_dir``, 0 when held by an unknown process, None when free.

    qdrant-edge takes an exclusive flock on the shard's ``wal`` directory while
    the shard is open; taking and dropping the same lock here tells whether a
    second open would fail, without opening the shard.
    """
    try:
        fd = os.open(wal_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None  # no WAL yet: nothing can hold it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _pid_from_proc_locks(os.fstat(fd)) or 0
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _pid_from_proc_locks(st: os.stat_result) -> int | None:
    # Lines look like "1: FLOCK  ADVISORY  WRITE 8156 fe:00:2196212 0 EOF".
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines():
            fields = line.split()
            if len(fields) < 6 or fields[1] != "FLOCK":
                continue
            try:
                major, minor, inode = fields[5].split(":")
                if (int(major, 16), int(minor, 16), int(inode)) == want:
                    return int(fields[4])
            except ValueError:
                continue
    return None


def check_index_free(settings: Settings, collection: str | None = None) -> None:
    """Raise BusyError when another process has the embedded collection open."""
    edge = edge_collection(settings, collection)
    if edge is None:
        return  # a Qdrant server serves many clients at once
    pid = lock_holder(edge.path / "wal")
    if pid is None:
        return
    # Only the pid: another process's command line can hold a question (`docquery ask "..."`).
    who = f"process {pid}" if pid else "another process"
    raise BusyError(
        f"the embedded index {edge.path} (collection {edge.name!r}) is open in {who}, "
        "for example a running `docquery serve`; the embedded engine allows one process at a time: "
        "stop that process and retry, or set DOCQUERY_QDRANT__URL to use a Qdrant server"
    )


def is_lock_failure(exc: BaseException) -> bool:
    """True when an index open failed because another process holds the shard (the race after the check)."""
    return "WouldBlock" in str(exc) or "Resource temporarily unavailable" in str(exc)


def port_busy(host: str, port: int, *, what: str, setting: str) -> BusyError:
    return BusyError(
        f"the {what} port {host}:{port} is in use by another process (another `docquery serve`?): "
        f"stop it, or choose another port with {setting}"
    )


def bind_socket(host: str, port: int, *, what: str, setting: str) -> socket.socket:
    """Bind (and listen on) ``host:port`` now, so a busy port is one clear line before anything starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # accepted connections inherit it; without it Nagle and delayed ACKs add ~40 ms to each response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise port_busy(host, port, what=what, setting=setting) from None
        # A name that does not resolve, or an address no interface here has: the host is wrong, not the port.
        wrong_host = isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
        check = "--host" if wrong_host else setting
        raise ConfigError(f"cannot listen on {host}:{port} for the {what}: {exc.strerror}; check {check}") from None
    sock.set_inheritable(True)
    return sock
