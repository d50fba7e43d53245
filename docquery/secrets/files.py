"""Secret files as the Vault Agent Injector renders them (``/vault/secrets/<name>``, an in-memory volume)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from docquery.secrets.base import Clock, SecretFormatError, SecretUnavailableError, check_secret_name

log = logging.getLogger(__name__)

_MISSING = object()


def directory_problem(directory: Path) -> str | None:
    """Why ``directory`` cannot hold readable secret files (missing, not a directory, unreadable), or None.

    Read and search permission both: listing needs the first, opening a file inside the second.
    """
    try:
        st = directory.stat()
    except OSError as exc:
        return _STAT_PROBLEMS.get(type(exc), f"cannot be read ({exc.strerror})")
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if not os.access(directory, os.R_OK | os.X_OK):
        return "cannot be read (permission denied)"
    return None


_STAT_PROBLEMS: dict[type[OSError], str] = {
    FileNotFoundError: "does not exist",
    NotADirectoryError: "is not a directory (a part of its path is a file)",
    PermissionError: "cannot be reached (permission denied on a directory above it)",
}


@dataclasses.dataclass(frozen=True)
class _FileVersion:
    """One observed version of a file. Immutable, so a reader keeps a consistent value."""

    stat_key: tuple[int, int, int, int] | None  # None: file absent
    content: bytes | None
    generation: int
    read_at: float
    checked_at: float
    parsed: Any = _MISSING  # JSON parse cache for this version (set once, under the lock)


class FileSecretSource:
    """Secret files as the Vault Agent renders them, re-read when they change.

    A stat (inode, mtime, size, ctime) is taken at most every ``check_interval_s``
    per file; the file is re-read when the stat changes, and also every
    ``full_reread_s`` in case a same-size write landed within the filesystem's
    mtime granularity. The Agent writes by rename and Kubernetes secret volumes
    swap a symlink, both of which change the inode.

    In-flight requests keep the value object they already read; the next call
    after a change returns the new value.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        check_interval_s: float = 0.25,
        full_reread_s: float = 5.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self._dir = Path(directory)
        self._interval = check_interval_s
        self._full_reread = full_reread_s
        self._clock = clock
        self._lock = threading.Lock()
        self._files: dict[str, _FileVersion] = {}

    @property
    def directory(self) -> Path:
        return self._dir

    def get_text(self, name: str) -> SecretStr | None:
        content = self._current(name).content
        if content is None:
            return None
        try:
            text = content.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SecretFormatError(f"secret file {name!r} is not UTF-8") from None
        return SecretStr(text) if text else None

    def get_json(self, name: str) -> Any | None:
        current = self._current(name)
        if current.content is None:
            return None
        if current.parsed is _MISSING:
            try:
                parsed = json.loads(current.content)
            except (ValueError, UnicodeDecodeError):
                # "from None": JSONDecodeError keeps the whole document in .doc.
                raise SecretFormatError(f"secret file {name!r} is not valid JSON") from None
            with self._lock:
                latest = self._files.get(name)
                if latest is not None and latest.generation == current.generation:
                    self._files[name] = dataclasses.replace(latest, parsed=parsed)
            return parsed
        return current.parsed

    def version(self, name: str) -> int | None:
        current = self._current(name)
        return None if current.content is None else current.generation

    # -- internals -------------------------------------------------------------

    def _current(self, name: str) -> _FileVersion:
        check_secret_name(name)
        now = self._clock()
        cached = self._files.get(name)  # dict.get is atomic: the fast path takes no lock
        if cached is not None and now - cached.checked_at < self._interval:
            return cached
        with self._lock:
            cached = self._files.get(name)
            if cached is not None and now - cached.checked_at < self._interval:
                return cached
            fresh = self._refresh(name, cached, now)
            self._files[name] = fresh
            return fresh

    def _refresh(self, name: str, cached: _FileVersion | None, now: float) -> _FileVersion:
        path = self._dir / name
        try:
            st = path.stat()
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise SecretUnavailableError(f"cannot stat secret file {name!r}: {exc.strerror}") from None
        stat_key = None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)
        unchanged = cached is not None and stat_key == cached.stat_key
        if unchanged and cached is not None and (stat_key is None or now - cached.read_at < self._full_reread):
            return dataclasses.replace(cached, checked_at=now)
        content = None if st is None else self._read(path, name)
        if cached is not None and content == cached.content:
            return dataclasses.replace(cached, stat_key=stat_key, read_at=now, checked_at=now)
        generation = 1 if cached is None else cached.generation + 1
        if cached is not None:
            # Names and generations only: the values never reach a log line.
            log.info("secret file %s changed (generation %d)", name, generation)
        return _FileVersion(stat_key, content, generation, read_at=now, checked_at=now)

    @staticmethod
    def _read(path: Path, name: str) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None  # removed between stat and read
        except OSError as exc:
            raise SecretUnavailableError(f"cannot read secret file {name!r}: {exc.strerror}") from None
