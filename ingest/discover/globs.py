"""The corpus's one glob language: ``--include``/``--exclude`` and the ``release:`` paths of an ACL file.

A pattern without ``/`` matches the file name or any folder name on the path (``*.md``, ``drafts``);
a pattern with ``/`` matches the path or one of its folders (``drafts/deep``), where ``*`` also
matches across folders (``drafts/*``) and ``**/`` matches zero or more folders (``docs/**/*.md``
takes ``docs/a.md`` too); a trailing ``/`` matches folders only (``drafts/``); a leading ``./`` is
ignored. Matching is case-sensitive.
"""

from __future__ import annotations

from fnmatch import fnmatchcase


def glob_match(pattern: str, rel: str) -> bool:
    """``rel`` is a file's path relative to the folder the pattern is written for, with ``/``."""
    pattern = pattern.removeprefix("./")
    parts = rel.split("/")
    folders_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        return any(fnmatchcase(part, pattern) for part in (parts[:-1] if folders_only else parts))
    # The path itself, or one of its folders: excluding a folder excludes what is in it.
    folders = ["/".join(parts[:i]) for i in range(1, len(parts))]
    return any(_path_match(pattern, c) for c in (folders if folders_only else [*folders, rel]))


def _path_match(pattern: str, rel: str) -> bool:
    return any(fnmatchcase(rel, variant) for variant in _zero_folder_variants(pattern))


def _zero_folder_variants(pattern: str) -> list[str]:
    """fnmatch's ``**/`` needs at least one folder: add each combination of them matching none."""
    head, sep, tail = pattern.partition("**/")
    if not sep:
        return [pattern]
    rest = _zero_folder_variants(tail)
    return [head + "**/" + t for t in rest] + [head + t for t in rest]
