"""ACL labels per folder: a ``.docquery-acl.yaml`` file next to the documents.

Format (one of the two keys)::

    # .docquery-acl.yaml
    groups: [staff, hr]      # who may read documents in this folder and below
    # or
    public: true             # readable by every authenticated caller

The nearest file wins: a folder's file applies to it and to every subfolder
until a deeper file overrides it (no merging). Files are looked up from the
document's folder up to the ingest root, never above it. ``--groups`` /
``--public`` on the command line is the fallback for documents no file covers.
A document with neither is refused before anything is written (exit 2): every
chunk must carry non-empty ``acl_groups`` or the explicit public label.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from docquery.collection import PUBLIC_GROUP
from ingest.model import UsageError

ACL_FILE = ".docquery-acl.yaml"
_KEYS = {"groups", "public"}


def parse_groups(value: str) -> tuple[str, ...]:
    return normalise_groups([g for g in value.split(",")], "--groups")


def normalise_groups(groups: list[Any], origin: str) -> tuple[str, ...]:
    clean = sorted({str(g).strip() for g in groups if str(g).strip()})
    if PUBLIC_GROUP in clean:
        raise UsageError(f"{origin}: {PUBLIC_GROUP!r} is a reserved label; use public: true / --public")
    bad = [g for g in clean if any(c.isspace() or c == "," for c in g)]
    if bad:
        raise UsageError(f"{origin}: group names may not contain spaces or commas")
    if not clean:
        raise UsageError(f"{origin}: no groups given")
    return tuple(clean)


def read_acl_file(path: Path) -> tuple[str, ...]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raise UsageError(f"{path}: cannot read ACL file (not valid UTF-8 YAML)") from None
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{path}: expected a mapping with 'groups: [...]' or 'public: true'")
    unknown = set(map(str, doc)) - _KEYS
    if unknown:
        raise UsageError(f"{path}: unknown keys {sorted(unknown)}; allowed: groups, public")
    public, groups = doc.get("public"), doc.get("groups")
    if public is not None and not isinstance(public, bool):
        raise UsageError(f"{path}: 'public' must be true or false")
    if public and groups:
        raise UsageError(f"{path}: give either 'groups' or 'public: true', not both")
    if public:
        return (PUBLIC_GROUP,)
    if isinstance(groups, str):
        groups = groups.split(",")
    if not isinstance(groups, list):
        raise UsageError(f"{path}: 'groups' must be a non-empty list of group names")
    return normalise_groups(groups, str(path))


class AclResolver:
    """Resolves a file's ACL from folder files (nearest wins) or the CLI fallback. Caches per folder."""

    def __init__(self, fallback: tuple[str, ...] | None, fallback_origin: str) -> None:
        self._fallback = fallback
        self._fallback_origin = fallback_origin
        self._cache: dict[tuple[Path, Path], tuple[tuple[str, ...], str] | None] = {}

    def _folder(self, folder: Path, root: Path) -> tuple[tuple[str, ...], str] | None:
        if (folder, root) in self._cache:
            return self._cache[(folder, root)]
        candidate = folder / ACL_FILE
        found: tuple[tuple[str, ...], str] | None
        if candidate.is_file():
            found = (read_acl_file(candidate), str(candidate))
        elif folder == root or root not in folder.parents:
            found = None
        else:
            found = self._folder(folder.parent, root)
        self._cache[(folder, root)] = found
        return found

    def resolve(self, root: Path, path: Path) -> tuple[tuple[str, ...], str] | None:
        found = self._folder(path.parent, root)
        if found is not None:
            return found
        if self._fallback is not None:
            return self._fallback, self._fallback_origin
        return None
