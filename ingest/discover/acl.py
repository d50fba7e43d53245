"""ACL labels per folder: a ``.docquery-acl.yaml`` file next to the documents.

Schema (strict; anything else fails closed, see below)::

    # .docquery-acl.yaml
    groups: [staff, hr]      # a non-empty list of group names (GROUP_PATTERN)
    # or
    public: true             # readable by every authenticated caller
    release:                 # optional: quarantine this folder's owner releases (ingest.discover.release)
      - {reason: injection, paths: ["examples/*"]}

The nearest file wins: a folder's file applies to it and to every subfolder
until a deeper file overrides it (no merging). Files are looked up from the
document's real folder upwards to the ACL root, and never above it: whoever can
write above the corpus decides nothing and blocks nothing. The root is each
``PATH`` (the outermost, where one given path holds another), or the folder
declared with ``--acl-root`` (``ingest.acl_root``) for a share ingested one
subfolder at a time; a ``PATH`` that resolves outside a declared root is exit 2.
``--groups`` / ``--public`` on the command line is the fallback for documents no
file covers.
A document with neither is refused before anything is written (exit 2): every
chunk must carry non-empty ``acl_groups`` or the explicit public label.

An ACL file is an access-control decision written by whoever can write into a
folder of an untrusted corpus, so it fails closed: it must be a regular file
(not a link, folder or FIFO), at most ``MAX_ACL_BYTES``, plain YAML without
anchors, aliases, tags, merge keys or duplicate keys (the loader refuses them
while parsing, so an alias bomb costs one event), and a near-miss name such as
``.docquery-acl.yml`` is refused rather than silently ignored. A refused file
(``Broken``) fails its own subtree only: the documents it governs are withdrawn
and reported, and the rest of the run goes on.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from docquery.core.collection import GROUP_PATTERN, PUBLIC_GROUP, is_valid_group_name
from ingest.discover.folders import Folders
from ingest.discover.release import Release, parse_releases, released
from ingest.model import UsageError

ACL_FILE = ".docquery-acl.yaml"
MAX_ACL_BYTES = 16 * 1024
_MAX_DEPTH = 5  # mapping > list > mapping > list > scalar (release: [{paths: [...]}]) is all the schema needs
# A near-miss name is the ACL file's name spelled otherwise: these once case, compatibility forms,
# punctuation and the suffixes below are folded away. A document that only mentions it ("DocQuery ACL
# guide.md") is not one.
_NEAR_MISS_KEYS = frozenset({"docqueryacl", "docqueryacls"})
_NEAR_MISS_SUFFIXES = (".yaml", ".yml", ".json", ".bak", ".old", ".orig", ".swp", ".tmp", ".txt", "~")
_KIND_NAMES = {"NoneType": "null", "int": "a number", "float": "a number", "bool": "a boolean", "list": "a list"}


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses, while composing, what an ACL file never needs: anchors and
    aliases (alias bombs), explicit tags, merge keys, duplicate keys and deep nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                problem="YAML anchors and aliases are not allowed", problem_mark=event.start_mark
            )
        if getattr(event, "tag", None) is not None and not isinstance(event, yaml.DocumentStartEvent):
            raise yaml.MarkedYAMLError(problem="YAML tags are not allowed", problem_mark=event.start_mark)
        self._depth += 1
        try:
            if self._depth > _MAX_DEPTH:
                raise yaml.MarkedYAMLError(problem="nested too deeply", problem_mark=event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def flatten_mapping(self, node: Any) -> None:
        for key, _ in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                raise yaml.MarkedYAMLError(problem="YAML merge keys are not allowed", problem_mark=key.start_mark)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise yaml.MarkedYAMLError(problem="keys must be plain names", problem_mark=key_node.start_mark)
            if key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r}", problem_mark=key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_bool(self, node: Any) -> bool:
        # YAML 1.1 reads yes/no/on/off as booleans; an author writing `[NO]` meant a name.
        if node.value not in ("true", "false"):
            raise yaml.MarkedYAMLError(
                problem=f"{node.value!r} is ambiguous (YAML reads it as a boolean); quote it or write true/false",
                problem_mark=node.start_mark,
            )
        return bool(node.value == "true")


_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _StrictLoader.construct_yaml_bool)


def parse_groups(value: str) -> tuple[str, ...]:
    return normalise_groups([g for g in value.split(",") if g.strip()], "--groups")


def normalise_groups(groups: list[Any], origin: str) -> tuple[str, ...]:
    if not groups:
        raise UsageError(f"{origin}: no groups given")
    clean: set[str] = set()
    for i, group in enumerate(groups, start=1):
        if not isinstance(group, str):
            kind = _KIND_NAMES.get(type(group).__name__, "a " + type(group).__name__)
            raise UsageError(f"{origin}: group {i} is {kind}, not a name; quote it if it is a name")
        name = group.strip()
        if name == PUBLIC_GROUP:
            raise UsageError(f"{origin}: {PUBLIC_GROUP!r} is a reserved label; use public: true / --public")
        if not is_valid_group_name(name):
            raise UsageError(f"{origin}: group {i} is not a valid group name (pattern {GROUP_PATTERN})")
        clean.add(name)
    return tuple(sorted(clean))


def is_near_miss(name: str) -> bool:
    """A file name that looks meant as an ACL file but is not exactly ``ACL_FILE``."""
    if name == ACL_FILE or (name.isascii() and "acl" not in name.lower()):
        return False  # the common case, without normalising every file name of a corpus
    folded = unicodedata.normalize("NFKC", name).casefold().lstrip(".")
    cut = True
    while cut:
        cut = False
        for suffix in _NEAR_MISS_SUFFIXES:
            if folded.endswith(suffix) and len(folded) > len(suffix):
                folded, cut = folded[: -len(suffix)], True
    return "".join(ch for ch in folded if ch.isalnum()) in _NEAR_MISS_KEYS


@dataclass(frozen=True)
class AclFile:
    """A valid ACL file's content: who reads the folder, and which quarantine its owner releases."""

    groups: tuple[str, ...]
    releases: tuple[Release, ...] = ()


def read_acl_file(path: Path, dir_fd: int | None = None) -> AclFile:
    """Raises UsageError naming ``path`` and the problem. With ``dir_fd`` (the folder's descriptor held
    since discovery) the file is looked up in that folder, not by its path."""
    where = path.name if dir_fd is not None else path
    try:
        info = os.stat(where, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ACL file ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise UsageError(f"{path}: ACL file is {kind}; it must be a regular file")
    if info.st_size > MAX_ACL_BYTES:
        raise UsageError(f"{path}: ACL file is larger than {MAX_ACL_BYTES} bytes")
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise OSError("swapped")
            raw = fh.read(MAX_ACL_BYTES + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        raise UsageError(f"{path}: cannot read ACL file (not a readable UTF-8 file)") from None
    if len(raw) > MAX_ACL_BYTES:
        raise UsageError(f"{path}: ACL file is larger than {MAX_ACL_BYTES} bytes")
    try:
        doc = yaml.load(text, Loader=_StrictLoader)  # noqa: S506  # _StrictLoader is a restricted SafeLoader
    except yaml.MarkedYAMLError as exc:
        line = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark is not None else ""
        raise UsageError(f"{path}: invalid ACL file{line}: {exc.problem or 'bad YAML'}") from None
    except (yaml.YAMLError, RecursionError):
        raise UsageError(f"{path}: invalid ACL file (not valid YAML)") from None
    return acl_from_document(doc, str(path))


def acl_from_document(doc: Any, origin: str) -> AclFile:
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{origin}: expected a mapping with 'groups: [...]' or 'public: true'")
    unknown = sorted(set(doc) - {"groups", "public", "release"})
    if unknown:
        raise UsageError(f"{origin}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: groups, public, release")
    releases = parse_releases(doc["release"], origin) if "release" in doc else ()
    return AclFile(_groups_of(doc, origin), releases)


def _groups_of(doc: dict[str, Any], origin: str) -> tuple[str, ...]:
    public, groups = doc.get("public"), doc.get("groups")
    if "public" in doc and not isinstance(public, bool):
        raise UsageError(f"{origin}: 'public' must be true or false")
    if public and "groups" in doc:
        raise UsageError(f"{origin}: give either 'groups' or 'public: true', not both")
    if public:
        return (PUBLIC_GROUP,)
    if not isinstance(groups, list) or not groups:
        raise UsageError(f"{origin}: 'groups' must be a non-empty list of group names")
    return normalise_groups(groups, origin)


def _has_entry(candidate: Path, dir_fd: int | None = None) -> bool:
    """Whether anything stands at ``candidate``. Only "no such entry" is no: a folder that cannot be
    read hides whether it has an ACL file, and taking that for "none" would give its documents the
    ACL of the folder above, so that folder is broken (``Broken``) instead."""
    try:
        if dir_fd is None:
            os.lstat(candidate)
        else:
            os.stat(candidate.name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        # ENAMETOOLONG too: a file with a shorter name than ACL_FILE in the same folder can still be
        # read, so a name too long to look up is "cannot tell" as well.
        raise UsageError(
            f"cannot tell whether {candidate.parent} has an ACL file ({exc.strerror or type(exc).__name__}): "
            "make the folder readable by the ingest, or --exclude it"
        ) from None
    return True


@dataclass(frozen=True)
class Found:
    """The ACL that applies to a folder, and what decided it: the ACL file's path relative to the
    ACL root, or the command-line flag. ``releases`` are that file's, written for ``folder`` (its
    folder); the flag releases nothing."""

    groups: tuple[str, ...]
    origin: str
    releases: tuple[Release, ...] = ()
    folder: Path | None = None

    def released_for(self, path: Path) -> tuple[str, ...]:
        """The flags released for the document at the real path ``path``, which this file governs."""
        if not self.releases or self.folder is None or not under(path, self.folder):
            return ()
        return released(self.releases, path.relative_to(self.folder).as_posix())


@dataclass(frozen=True)
class Broken:
    """The nearest ACL file of a folder is invalid (or cannot be looked up): its subtree fails closed.
    ``origin`` is the file's path relative to the ACL root; ``reason`` says what is wrong with ``file``."""

    origin: str
    reason: str
    file: Path


Resolution = Found | Broken


def under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class AclResolver:
    """Resolves a file's ACL from folder files (nearest wins, never above the ACL root) or the CLI
    fallback. Caches per folder.

    The ACL root is ``root`` when one is declared (``--acl-root``), else each ``PATH`` (a file's
    folder for a file), the outermost one where a given path lies inside another, so the order the
    paths are given in never changes an ACL. Files above the root are never looked at."""

    def __init__(self, fallback: tuple[str, ...] | None, fallback_origin: str, root: Path | None = None) -> None:
        self._fallback = fallback
        self._fallback_origin = fallback_origin
        self.declared = root.resolve() if root is not None else None
        self._roots: list[Path] = [] if self.declared is None else [self.declared]
        self._cache: dict[Path, Resolution | None] = {}
        self._files: dict[Path, Resolution] = {}  # each ACL file is read and checked once
        self.broken: dict[Path, Broken] = {}  # folder -> why its own ACL file is refused
        # The run's held folders (discovery sets them): ACL files are read through them, not by path.
        self.folders: Folders | None = None

    def _fd(self, folder: Path) -> int | None:
        return None if self.folders is None else self.folders.fd(folder)

    def add_root(self, folder: Path) -> None:
        """A resolved PATH's folder. Raises UsageError for one outside the declared root."""
        if self.declared is not None:
            if not under(folder, self.declared):
                raise UsageError(
                    f"{folder} is outside the ACL root {self.declared} (--acl-root, DOCQUERY_INGEST__ACL_ROOT): "
                    "give a path inside it, or declare a root that contains it"
                )
            return
        if not any(under(folder, r) for r in self._roots):
            self._roots = [r for r in self._roots if not under(r, folder)] + [folder]
            self._cache.clear()

    def root_of(self, folder: Path) -> Path | None:
        """The ACL root that bounds the lookup from ``folder`` (a real path)."""
        return next((r for r in self._roots if under(folder, r)), None)

    def mark_broken(self, file: Path, reason: str) -> None:
        """``file``'s folder fails closed (``file`` is a near-miss ACL file name, for example)."""
        folder = file.parent
        root = self.root_of(folder) or folder
        self.broken[folder] = Broken(file.relative_to(root).as_posix(), reason, file)
        self._cache.clear()

    def _own(self, folder: Path, root: Path) -> Resolution | None:
        """The folder's own ACL file: found, broken, or None when it has none."""
        if folder in self.broken:
            return self.broken[folder]
        candidate = folder / ACL_FILE
        origin = candidate.relative_to(root).as_posix()
        dir_fd = self._fd(folder)
        try:
            present = _has_entry(candidate, dir_fd)  # any kind of entry under that name is checked, never ignored
        except UsageError as exc:
            self.broken[folder] = Broken(origin, str(exc), folder)
            return self.broken[folder]
        if not present:
            return None
        if candidate not in self._files:
            try:
                content = read_acl_file(candidate, dir_fd)
                self._files[candidate] = Found(content.groups, origin, content.releases, folder)
            except UsageError as exc:
                self._files[candidate] = Broken(origin, str(exc).removeprefix(f"{candidate}: "), candidate)
        found = self._files[candidate]
        if isinstance(found, Broken):
            self.broken[folder] = found
        return found

    def _folder(self, folder: Path) -> Resolution | None:
        """The nearest ACL file from ``folder`` (a real path) up to its ACL root. Iterative: a tree
        may be thousands deep."""
        root = self.root_of(folder)
        if root is None:
            return None
        chain: list[Path] = []
        found: Resolution | None = None
        at = folder
        while True:
            if at in self._cache:
                found = self._cache[at]
                break
            chain.append(at)
            found = self._own(at, root)
            if found is not None or at == root:
                break
            at = at.parent
        for visited in chain:
            self._cache[visited] = found
        return found

    def check_folder(self, folder: Path) -> None:
        """Reads and checks the ACL file of ``folder`` if it has one; a refused one is kept in ``broken``."""
        root = self.root_of(folder)
        try:
            present = root is not None and _has_entry(folder / ACL_FILE, self._fd(folder))
        except UsageError:
            return  # cannot look into it: the walk reports the folder, and a document that needs it fails
        if present and root is not None:
            self._own(folder, root)

    def resolve(self, path: Path) -> Resolution | None:
        """The ACL of the file at the real path ``path``: the nearest folder file up to the ACL root
        (or the broken one that stops it), else the fallback, else None."""
        found = self._folder(path.parent)
        if found is not None:
            return found
        if self._fallback is not None:
            return Found(self._fallback, self._fallback_origin)
        return None
