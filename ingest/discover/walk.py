"""File discovery: walk the roots, apply include/exclude globs and the shard, attach ACLs.

* A directory is walked depth-first in a sorted, deterministic order, with an
  explicit stack (threat: a few thousand nested folders must not exhaust Python's
  recursion limit); symlinked folders are not followed (reported as skipped), and
  dot-files and dot-folders (``.git``, the ACL file itself) are skipped. Every ACL
  file in the tree is validated; a refused one, or a near-miss name
  (``.docquery-acl.yml``), fails its own subtree (its documents are rejected).
* A folder that cannot be listed (permission denied, path too long, I/O error) is a
  failure naming the folder, never a silent skip: its files and its ACL file are
  unknown (threat: files lost without a trace, or an ACL file never checked).
* A file whose path is not valid UTF-8 (a Latin-1 name from an old share, decoded by
  Python with surrogate escapes) is a failure, not a crash: ids, payloads and
  citations are UTF-8 text, and an escaped form could name another, real file.
* A file symlink is replaced by its target (threat: a link relabelling a
  document): the document is the target file, with the target's path relative to
  the root and the target's ACL, as if the walk had reached it directly. Links
  that leave the root, point into a dot-path, dangle or loop are refused.
* Globs (docs/ingestion.md, "Choosing files"; ``ingest.discover.globs``) match the
  path relative to the root.
* ``--shard I/N`` keeps the files whose relative path hashes to ``I`` modulo ``N``
  (SHA-256), so N jobs cover the corpus with no overlap and no gap.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ingest.discover.acl import ACL_FILE, AclResolver, Broken, is_near_miss
from ingest.discover.folders import Folders
from ingest.discover.globs import glob_match
from ingest.model import SourceFile, UsageError
from ingest.prepare.loaders import never_read, suffix_of, unsupported
from ingest.prepare.secrets import secret_file


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def owns(self, rel: str) -> bool:
        return self.count == 1 or shard_of(rel, self.count) == self.index


def shard_of(rel: str, count: int) -> int:
    # surrogateescape: the file system's own bytes for a name that is not UTF-8 (the same
    # bytes as UTF-8 for every other name), so such a file is reported by exactly one shard.
    return int.from_bytes(hashlib.sha256(rel.encode("utf-8", "surrogateescape")).digest()[:8], "big") % count


NOT_UTF8 = "file name is not valid UTF-8; rename it to UTF-8 (e.g. convmv -f latin1 -t utf8) and re-run"


def is_utf8_name(path: str) -> bool:
    """False for a path decoded with surrogate escapes (bytes that are not UTF-8)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        if self.include and not any(glob_match(p, rel) for p in self.include):
            return False
        return not any(glob_match(p, rel) for p in self.exclude)


@dataclass
class Discovery:
    files: list[SourceFile] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): failures
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): not documents
    roots: list[Path] = field(default_factory=list)
    file_roots: list[Path] = field(default_factory=list)  # files given directly as PATH
    # Folders that could not be listed (also in ``rejected``): what is under them is unknown,
    # so a document indexed there is neither missing nor known to keep its ACL.
    unlisted: list[Path] = field(default_factory=list)
    # Every folder walked, held open until the run ends (``close``): the reads go through them.
    folders: Folders = field(default_factory=Folders)

    def close(self) -> None:
        self.folders.close()


@dataclass(frozen=True)
class _Entry:
    path: Path
    rel: str  # relative to the root, with "/"
    link: bool  # a symlink: resolved and checked against the root before use
    regular: bool  # a regular file, known from the directory listing without another stat


@dataclass
class _Tree:
    entries: list[_Entry] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # every folder visited, the root first
    near_misses: list[Path] = field(default_factory=list)
    folder_links: list[Path] = field(default_factory=list)
    unlisted: list[tuple[Path, str]] = field(default_factory=list)  # (folder, reason)


def _walk(root: Path, folders: Folders) -> _Tree:
    """A folder's files (sorted), then its subfolders depth-first (sorted). Each entry's type
    comes from ``os.scandir``, so only symlinks cost a ``resolve``: every folder reached is real
    (``root`` is resolved and folder links are not followed), and so is every non-link path in it.
    Every folder is listed through its descriptor, opened from its parent's and held (``Folders``).

    Iterative: the stack holds the folders still to list, the next one on top, so the order is
    the recursive pre-order (a folder's subfolders are pushed in reverse)."""
    tree = _Tree()
    # (folder, its path relative to root + "/", its parent: None for the root, which is held already)
    stack: list[tuple[Path, str, Path | None]] = [(root, "", None)]
    while stack:
        folder, prefix, parent = stack.pop()
        try:
            fd = folders.open_child(parent, folder.name) if parent is not None else folders.open_root(root)
        except OSError as exc:
            swapped = exc.errno in (errno.ELOOP, errno.ENOTDIR)  # a link or a file since its parent was listed
            why = "changed during the ingest (replaced by a link): run again" if swapped else _cannot_list(exc)
            tree.unlisted.append((folder, why))
            continue
        try:
            with os.scandir(fd) as listing:
                every = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            tree.unlisted.append((folder, _cannot_list(exc)))
            continue
        tree.folders.append(folder)
        tree.near_misses.extend(folder / e.name for e in every if is_near_miss(e.name))
        subfolders: list[tuple[Path, str, Path | None]] = []
        for e in every:
            if e.name.startswith(".") and not (secret_file(e.name) and e.is_file(follow_symlinks=False)):
                continue  # a dot-file that holds credentials (.env) is listed, to be reported as skipped
            link = e.is_symlink()
            if _is_dir(e):
                if link:
                    tree.folder_links.append(folder / e.name)
                else:
                    subfolders.append((folder / e.name, f"{prefix}{e.name}/", folder))
            else:
                regular = not link and e.is_file(follow_symlinks=False)
                tree.entries.append(_Entry(folder / e.name, prefix + e.name, link, regular))
        stack.extend(reversed(subfolders))
    return tree


def _cannot_list(exc: OSError) -> str:
    return f"cannot list folder ({exc.strerror or type(exc).__name__})"


def _link_target(path: Path, root: Path) -> tuple[Path, str] | str:
    """(real path, its path relative to ``root``) of a file link, or why it is refused."""
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        return "dangling symlink (its target does not exist)"
    except (OSError, RuntimeError):  # ELOOP, or pathlib's own loop detection
        return "symlink loop"
    if root not in real.parents:
        return "symlink points outside the ingest root"
    rel = real.relative_to(root).as_posix()
    if any(part.startswith(".") for part in rel.split("/")):
        return "symlink points into a dot-file or dot-folder, which are not indexed"
    if not real.is_file():
        return "symlink does not point to a regular file"
    return real, rel


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows links, so a folder link is recognised (and skipped)
    except OSError:
        return False


def discover(paths: Sequence[Path], *, filters: Filters, shard: Shard, acl: AclResolver) -> Discovery:
    """Raises UsageError for a missing path, a path outside the declared ACL root, or a file with no
    ACL (nothing is written then). A broken ACL file fails its own subtree: its documents are rejected."""
    result = Discovery()
    seen: set[Path] = set()
    no_acl: list[str] = []
    acl.folders = result.folders
    given_paths = [_resolve_given(given) for given in paths]
    for resolved in given_paths:  # every root first: the outermost one bounds the lookup, whatever the order
        acl.add_root(resolved.parent if resolved.is_file() else resolved)
    for resolved in given_paths:
        _hold_down_to(resolved.parent if resolved.is_file() else resolved, acl, result.folders)
        root, candidates = _candidates(resolved, acl, result)
        for entry in candidates:
            _admit(entry, root, filters=filters, shard=shard, acl=acl, seen=seen, result=result, no_acl=no_acl)
    if no_acl:
        shown = ", ".join(no_acl[:5]) + (f" and {len(no_acl) - 5} more" if len(no_acl) > 5 else "")
        raise UsageError(
            f"no ACL for {len(no_acl)} file(s) ({shown}): pass --groups or --public, "
            f"or put a {ACL_FILE} in their folder"
        )
    # Each refused ACL file once, with what is wrong with it: whatever the filters or shard.
    result.rejected.extend((str(b.file), b.reason) for b in acl.broken.values())
    return result


def _admit(
    entry: _Entry,
    root: Path,
    *,
    filters: Filters,
    shard: Shard,
    acl: AclResolver,
    seen: set[Path],
    result: Discovery,
    no_acl: list[str],
) -> None:
    """One walked entry: a document with its ACL, a refusal, a skip, or nothing (filtered out)."""
    path, rel = entry.path, entry.rel
    if entry.link:
        target = _link_target(path, root)
        if isinstance(target, str):
            if filters.accepts(rel) and shard.owns(rel):
                result.rejected.append((str(path), target))
            return
        path, rel = target  # from here on the link is its target: same rel, shard and ACL
    if not filters.accepts(rel) or not shard.owns(rel) or path in seen:
        return
    seen.add(path)
    refused = _refused(path, entry)
    if refused is not None:
        (result.skipped if refused[0] else result.rejected).append((str(path), refused[1]))
    else:
        found = acl.resolve(path)
        if isinstance(found, Broken):
            result.rejected.append((str(path), withheld(found)))
        elif found is not None:
            held = result.folders.fd(path.parent)  # a link's target folder is walked too (real, in the root)
            if held is None:
                result.rejected.append((str(path), "its folder could not be opened"))
                return
            release = found.released_for(path)
            result.files.append(SourceFile(root, path, rel, found.groups, found.origin, dir_fd=held, released=release))
        elif never_read(path):  # a stray logo.png needs no ACL: it is skipped whatever its ACL
            result.skipped.append((str(path), unsupported(suffix_of(path))))
        else:
            no_acl.append(rel)


def _refused(path: Path, entry: _Entry) -> tuple[bool, str] | None:
    """(skipped rather than failed, why) for a file refused before its ACL is looked at."""
    credentials = secret_file(path.name)
    if credentials is not None:  # never opened, whatever its ACL
        return True, credentials
    if not is_utf8_name(str(path)):
        return False, NOT_UTF8
    if not (entry.regular or entry.link):
        return False, "not a regular file"
    return None


def withheld(broken: Broken) -> str:
    return (
        f"not indexed: the ACL file that governs it ({broken.origin}) is refused; "
        "its indexed version is withdrawn until the ACL file is fixed"
    )


def _hold_down_to(folder: Path, acl: AclResolver, folders: Folders) -> None:
    """Holds the folders from the ACL root down to a PATH's folder, so its ACL files are read through them."""
    top = acl.root_of(folder) or folder
    try:
        folders.open_root(top)
        folders.descend(top, folder)
    except OSError as exc:
        raise UsageError(f"cannot open {folder} ({exc.strerror or type(exc).__name__})") from None


def _resolve_given(given: Path) -> Path:
    if not given.exists():
        if os.path.lexists(given):
            raise UsageError(f"path is a dangling symlink or a symlink loop: {given}")
        raise UsageError(f"path not found: {given}")
    return given.resolve()


def _candidates(resolved: Path, acl: AclResolver, result: Discovery) -> tuple[Path, list[_Entry]]:
    """(root, entries) for one resolved PATH; checks every ACL file under it and records its roots."""
    if resolved.is_file():
        result.file_roots.append(resolved)
        acl.check_folder(resolved.parent)
        return resolved.parent, [_Entry(resolved, resolved.name, link=False, regular=True)]
    tree = _walk(resolved, result.folders)
    result.roots.append(resolved)
    for near in tree.near_misses:
        acl.mark_broken(near, f"looks like an ACL file but is not named {ACL_FILE}: rename or remove it")
    for folder in tree.folders:  # every ACL file in the tree, whatever the filters or shard
        acl.check_folder(folder)
    # Whatever the filters or shard: the folder's files and its ACL file are unknown to every run.
    result.rejected.extend((str(folder), reason) for folder, reason in tree.unlisted)
    result.unlisted.extend(folder for folder, _ in tree.unlisted)
    result.skipped.extend((str(p), "symlinked folder (not followed)") for p in tree.folder_links)
    return resolved, tree.entries
