"""ACL labels per folder: a ``.docquery-acl.yaml`` file next to the documents.

Schema (strict; anything else is exit 2 before anything is written)::

    # .docquery-acl.yaml
    groups: [staff, hr]      # a non-empty list of group names (GROUP_PATTERN)
    # or
    public: true             # readable by every authenticated caller

The nearest file wins: a folder's file applies to it and to every subfolder
until a deeper file overrides it (no merging). Files are looked up from the
document's real folder upwards, past the ingest root to the file system's root:
the ``PATH`` a run is given (a subfolder, a symlink to one, a glob's matches)
never decides which folder files apply (outside review, round 3: a link given
as ``PATH``, or a subfolder given before its parent, put an HR folder's
documents under ``--public``). ``--groups`` / ``--public`` on the command line
is the fallback for documents no file covers.
A document with neither is refused before anything is written (exit 2): every
chunk must carry non-empty ``acl_groups`` or the explicit public label.

An ACL file is an access-control decision written by whoever can write into a
folder of an untrusted corpus, so it fails closed: it must be a regular file
(not a link, folder or FIFO), at most ``MAX_ACL_BYTES``, plain YAML without
anchors, aliases, tags, merge keys or duplicate keys (the loader refuses them
while parsing, so an alias bomb costs one event), and a near-miss name such as
``.docquery-acl.yml`` is an error rather than silently ignored.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path
from typing import Any

import yaml

from docquery.core.collection import GROUP_PATTERN, PUBLIC_GROUP, is_valid_group_name
from ingest.model import UsageError

ACL_FILE = ".docquery-acl.yaml"
MAX_ACL_BYTES = 16 * 1024
_MAX_DEPTH = 3  # mapping > list > scalar is all the schema needs
# A near-miss name is the ACL file's name spelled otherwise: these once case, compatibility forms,
# punctuation and the suffixes below are folded away. A document that only mentions it ("DocQuery ACL
# guide.md") is not one: it stopped every run (outside review, round 3).
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


def read_acl_file(path: Path) -> tuple[str, ...]:
    """Raises UsageError naming ``path`` and the problem."""
    try:
        info = path.lstat()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ACL file ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise UsageError(f"{path}: ACL file is {kind}; it must be a regular file")
    if info.st_size > MAX_ACL_BYTES:
        raise UsageError(f"{path}: ACL file is larger than {MAX_ACL_BYTES} bytes")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
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


def acl_from_document(doc: Any, origin: str) -> tuple[str, ...]:
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{origin}: expected a mapping with 'groups: [...]' or 'public: true'")
    unknown = sorted(set(doc) - {"groups", "public"})
    if unknown:
        raise UsageError(f"{origin}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: groups, public")
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


def _has_entry(candidate: Path) -> bool:
    """Whether anything stands at ``candidate``. Only "no such entry" is no: a folder that cannot be
    read hides whether it has an ACL file, and taking that for "none" would give its documents the
    ACL of the folder above (outside review, F2), so it stops the run instead."""
    try:
        os.lstat(candidate)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        # ENAMETOOLONG too: a file with a shorter name than ACL_FILE in the same folder can still be
        # read (outside review, round 3), so a name too long to look up is "cannot tell" as well.
        raise UsageError(
            f"cannot tell whether {candidate.parent} has an ACL file ({exc.strerror or type(exc).__name__}): "
            "make the folder readable by the ingest, or --exclude it"
        ) from None
    return True


class AclResolver:
    """Resolves a file's ACL from folder files (nearest wins) or the CLI fallback. Caches per folder."""

    def __init__(self, fallback: tuple[str, ...] | None, fallback_origin: str) -> None:
        self._fallback = fallback
        self._fallback_origin = fallback_origin
        self._cache: dict[Path, tuple[tuple[str, ...], str] | None] = {}
        self._files: dict[Path, tuple[str, ...]] = {}  # each ACL file is read and checked once

    def _read(self, candidate: Path) -> tuple[str, ...]:
        if candidate not in self._files:
            self._files[candidate] = read_acl_file(candidate)
        return self._files[candidate]

    def _folder(self, folder: Path) -> tuple[tuple[str, ...], str] | None:
        """The nearest ACL file from ``folder`` (a real path) upwards. Iterative: a tree may be thousands deep."""
        chain: list[Path] = []
        found: tuple[tuple[str, ...], str] | None = None
        at: Path | None = folder
        while at is not None:
            if at in self._cache:
                found = self._cache[at]
                break
            chain.append(at)
            candidate = at / ACL_FILE
            if _has_entry(candidate):  # any kind of entry under that name is checked, never ignored
                found = (self._read(candidate), str(candidate))
                break
            at = None if at.parent == at else at.parent
        for visited in chain:
            self._cache[visited] = found
        return found

    def check_folder(self, folder: Path) -> None:
        """Validates the ACL file of ``folder`` if it has one (raises UsageError).

        A folder that cannot be looked into is not judged here: the walk reports it (its files are
        not found), and a document whose ACL depends on it stops the run in ``resolve``."""
        candidate = folder / ACL_FILE
        try:
            present = _has_entry(candidate)
        except UsageError:
            return
        if present:
            self._read(candidate)

    def resolve(self, path: Path) -> tuple[tuple[str, ...], str] | None:
        """The ACL of the file at the real path ``path``: the nearest folder file, else the fallback."""
        found = self._folder(path.parent)
        if found is not None:
            return found
        if self._fallback is not None:
            return self._fallback, self._fallback_origin
        return None
