"""Releases of quarantined chunks: the optional ``release:`` key of a ``.docquery-acl.yaml``.

::

    release:
      - reason: injection          # injection | secret | zero_width | hidden_html | hidden_text
        paths: ["examples/*"]      # globs relative to this file's folder (ingest.discover.globs)
      - reason: hidden_html        # no paths: the whole subtree this file governs

Only the file that governs a document (the nearest one, within the ACL root) releases its chunks:
a folder's owner decides for their folder, and a file higher up releases nothing below a nearer one.
A chunk is indexed normally only when every one of its flags is released; its flags stay in the
payload. A malformed entry makes the whole ACL file invalid (its subtree fails closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingest.discover.globs import glob_match
from ingest.model import UsageError

RELEASABLE = ("hidden_html", "hidden_text", "injection", "secret", "zero_width")
_SHAPE = "'release' must be a non-empty list of {reason: ..., paths: [glob, ...]}"


@dataclass(frozen=True)
class Release:
    reason: str
    paths: tuple[str, ...] = ()  # globs relative to the ACL file's folder; () is its whole subtree

    def covers(self, rel: str) -> bool:
        return not self.paths or any(glob_match(p, rel) for p in self.paths)


def parse_releases(value: Any, origin: str) -> tuple[Release, ...]:
    """Raises UsageError naming ``origin``, the entry and what is wrong with it."""
    if not isinstance(value, list) or not value:
        raise UsageError(f"{origin}: {_SHAPE}")
    return tuple(_entry(entry, f"{origin}: release entry {i}") for i, entry in enumerate(value, start=1))


def _entry(entry: Any, where: str) -> Release:
    if not isinstance(entry, dict):
        raise UsageError(f"{where} is not a mapping; {_SHAPE}")
    unknown = sorted(set(entry) - {"reason", "paths"})
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: reason, paths")
    reason = entry.get("reason")
    if reason not in RELEASABLE:
        raise UsageError(f"{where}: 'reason' must be one of {', '.join(RELEASABLE)}")
    if "paths" not in entry:
        return Release(reason)
    paths = entry["paths"]
    if not isinstance(paths, list) or not paths:
        raise UsageError(f"{where}: 'paths' must be a non-empty list of globs (leave it out for the whole folder)")
    for n, glob in enumerate(paths, start=1):
        _check_glob(glob, f"{where}, path {n}")
    return Release(reason, tuple(paths))


def _check_glob(glob: Any, where: str) -> None:
    """A glob is relative to the ACL file's folder and stays in it: nothing absolute, no ``..``."""
    if not isinstance(glob, str) or not glob.strip():
        raise UsageError(f"{where} is not a glob; quote it if it is one")
    if glob.startswith("/") or ".." in glob.split("/") or "\\" in glob or "\x00" in glob:
        raise UsageError(f"{where}: a glob is relative to the ACL file's folder (no leading '/', no '..', no '\\')")


def released(releases: tuple[Release, ...], rel: str) -> tuple[str, ...]:
    """The reasons released for the document at ``rel`` (relative to the ACL file's folder), sorted."""
    return tuple(sorted({r.reason for r in releases if r.covers(rel)}))
