"""The spool: where an upload's files wait for the worker, under the data dir (docs/design.md, "Uploads").

``<data_dir>/uploads/<collection>/<job_id>/<n>/<name>``: folders 0700, files 0600, created exclusively and
never through a link. ``n`` is the file's place in its request; the name, checked before it reaches the
disk (docquery.validation.upload_file_name), is kept so the loaders see the suffix and stem the client
gave. A request body is written here as it is read; the worker removes each file when its document
reaches a final state, and a refused request removes all of its own.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from pathlib import Path

from docquery.config.settings import Settings
from docquery.validation import InvalidRequest, upload_file_name

log = logging.getLogger("docquery.uploads")
_JOB = re.compile(r"[0-9a-f]{32}")
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def spool_root(settings: Settings, collection: str) -> Path:
    return settings.data_dir / "uploads" / collection


class Spool:
    def __init__(self, root: Path, max_name_bytes: int) -> None:
        self.root = root
        self.max_name_bytes = max_name_bytes

    def new_job(self) -> str:
        job_id = uuid.uuid4().hex
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.root / job_id).mkdir(mode=0o700)
        return job_id

    def create(self, job_id: str, n: int, name: str) -> tuple[int, str]:
        """An open descriptor for file ``n`` of the job, and its path relative to the spool."""
        folder = self.root / job_id / str(n)
        folder.mkdir(mode=0o700)
        fd = os.open(folder / name, _OPEN_FLAGS, 0o600)
        return fd, f"{job_id}/{n}/{name}"

    def path_of(self, rel: str) -> Path | None:
        """The spool file a record names, or None when the name is not one this spool makes (a record is
        data: its ``spool`` must not lead anywhere else)."""
        parts = rel.split("/")
        if len(parts) != 3 or _JOB.fullmatch(parts[0]) is None or not parts[1].isdigit():
            return None
        try:
            upload_file_name(parts[2], self.max_name_bytes, "spool")
        except InvalidRequest:
            return None
        return self.root / parts[0] / parts[1] / parts[2]

    def remove_file(self, rel: str) -> None:
        """Remove one spooled file, and its job's folders once they are empty."""
        path = self.path_of(rel)
        if path is None:
            return
        path.unlink(missing_ok=True)
        for folder in (path.parent, path.parent.parent):
            try:
                folder.rmdir()
            except OSError:
                return  # not empty (other files of the job wait), or already gone

    def remove_job(self, job_id: str) -> None:
        if _JOB.fullmatch(job_id):
            shutil.rmtree(self.root / job_id, ignore_errors=True)

    def sweep(self, keep: set[str]) -> int:
        """Remove every spooled job folder no record names (``keep``: the job ids still waiting); returns how
        many. Run at start: a process killed while receiving a request left its files behind."""
        if not self.root.is_dir():
            return 0
        removed = 0
        for entry in self.root.iterdir():
            if entry.name not in keep and _JOB.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
        return removed
