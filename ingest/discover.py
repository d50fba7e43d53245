"""File discovery: walk the roots, apply include/exclude globs and the shard, attach ACLs.

* A directory is walked recursively in a sorted, deterministic order; symlinked
  folders are not followed, and dot-files and dot-folders (``.git``, the ACL
  file itself) are skipped.
* Globs use ``fnmatch``: a pattern without ``/`` matches the file name
  (``*.md``), a pattern with ``/`` matches the path relative to the root, and
  ``*`` also matches across folders (``drafts/*``).
* ``--shard I/N`` keeps the files whose relative path hashes to ``I`` modulo ``N``
  (SHA-256), so N jobs cover the corpus with no overlap and no gap.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ingest.acl import AclResolver
from ingest.model import SourceFile, UsageError


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def owns(self, rel: str) -> bool:
        return self.count == 1 or shard_of(rel, self.count) == self.index


def shard_of(rel: str, count: int) -> int:
    return int.from_bytes(hashlib.sha256(rel.encode("utf-8")).digest()[:8], "big") % count


_ENV_REF = re.compile(r"^\$(?:\{(\w+)\}|\((\w+)\)|(\w+))$")


def parse_shard(value: str | None, environ: dict[str, str] | None = None) -> Shard:
    """``I/N`` with 0 <= I < N. ``I`` may be ``$JOB_COMPLETION_INDEX`` (also ``${..}``/``$(..)``),
    read from the environment, for Kubernetes Indexed Jobs whose args were not expanded."""
    if value is None:
        return Shard()
    env = os.environ if environ is None else environ
    i_text, sep, n_text = value.partition("/")
    m = _ENV_REF.match(i_text.strip())
    if m:
        name = next(g for g in m.groups() if g)
        i_text = env.get(name, "")
        if not i_text:
            raise UsageError(f"--shard: environment variable {name} is not set")
    try:
        index, count = int(i_text), int(n_text)
    except ValueError:
        raise UsageError("--shard must look like I/N, e.g. 0/4") from None
    if not sep or count < 1 or not 0 <= index < count:
        raise UsageError("--shard I/N needs N >= 1 and 0 <= I < N")
    return Shard(index, count)


@dataclass(frozen=True)
class Filters:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def accepts(self, rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]

        def match(pattern: str) -> bool:
            return fnmatchcase(rel if "/" in pattern else name, pattern)

        if self.include and not any(match(p) for p in self.include):
            return False
        return not any(match(p) for p in self.exclude)


@dataclass
class Discovery:
    files: list[SourceFile] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    roots: list[Path] = field(default_factory=list)
    file_roots: list[Path] = field(default_factory=list)  # files given directly as PATH


def _walk(root: Path) -> list[Path]:
    out: list[Path] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(Path(folder) / n for n in sorted(names) if not n.startswith("."))
    return out


def discover(paths: Sequence[Path], *, filters: Filters, shard: Shard, acl: AclResolver) -> Discovery:
    """Raises UsageError for a missing path or a file with no ACL (nothing is written then)."""
    result = Discovery()
    seen: set[Path] = set()
    no_acl: list[str] = []
    for given in paths:
        if not given.exists():
            raise UsageError(f"path not found: {given}")
        resolved = given.resolve()
        if resolved.is_file():
            root, candidates = resolved.parent, [resolved]
            result.file_roots.append(resolved)
        else:
            root, candidates = resolved, _walk(resolved)
            result.roots.append(resolved)
        for path in candidates:
            rel = path.relative_to(root).as_posix()
            if not filters.accepts(rel) or not shard.owns(rel):
                continue
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            if path.is_symlink() and root not in real.parents:
                result.rejected.append((str(path), "symlink points outside the ingest root"))
                continue
            if not real.is_file():
                result.rejected.append((str(path), "not a regular file"))
                continue
            found = acl.resolve(root, path)
            if found is None:
                no_acl.append(rel)
                continue
            result.files.append(SourceFile(root=root, path=real, rel=rel, acl_groups=found[0], acl_origin=found[1]))
    if no_acl:
        shown = ", ".join(no_acl[:5]) + (f" and {len(no_acl) - 5} more" if len(no_acl) > 5 else "")
        raise UsageError(
            f"no ACL for {len(no_acl)} file(s) ({shown}): pass --groups or --public, "
            f"or put a .docquery-acl.yaml in their folder"
        )
    return result
