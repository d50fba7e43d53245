"""ACL files fail closed: a strict schema, regular files only, no YAML features beyond
plain mappings and lists, bounded parsing, and near-miss names are errors."""

from __future__ import annotations

import os
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docquery.core.collection import PUBLIC_GROUP
from ingest.discover.acl import ACL_FILE, GROUP_PATTERN, AclResolver, is_near_miss, read_acl_file
from ingest.discover.walk import Filters, Shard, discover
from ingest.model import UsageError
from tests.support.ingest_fixtures import write

# The review's 338-byte alias bomb ("billion laughs").
ALIAS_BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\ngroups: [*g]\n"
)

GOOD = [
    ("groups: [staff]\n", ("staff",)),
    ("groups: [staff, hr]\n", ("hr", "staff")),
    ("groups:\n  - legal\n  - board\n", ("board", "legal")),
    ('groups: ["yes", "no", "null"]\n', ("no", "null", "yes")),
    ("groups: ['/org/team-a', svc:reader, a.b@example.com]\n", ("/org/team-a", "a.b@example.com", "svc:reader")),
    ("public: true\n", (PUBLIC_GROUP,)),
    ("groups: [a]\npublic: false\n", ("a",)),
    ("# comment\ngroups: [x] # trailing\n", ("x",)),
]

BAD = [
    ("groups: [NO, yes]\n", "ambiguous"),  # the review's: became False, True
    ("groups: [~]\n", "null"),  # became None
    ("groups: [[hr]]\n", "is a list"),  # became "['hr']"
    ("groups: [[[[hr]]]]\n", "nested too deeply"),
    ("groups: [hr]\ngroups: [staff]\n", "duplicate key"),
    ("public: true\npublic: false\n", "duplicate key"),
    (ALIAS_BOMB, "anchors and aliases"),
    ("x: &x staff\ngroups: [*x]\n", "anchors and aliases"),
    ("groups: !!python/object:os.system [ls]\n", "tags"),
    ("groups: [!!str 1]\n", "tags"),
    ("!!map {groups: [a]}\n", "tags"),
    ("<<: {groups: [a]}\n", ""),
    ("groups: [1]\n", "number"),
    ("groups: [1.5]\n", "number"),
    ("groups: [2024-01-01]\n", "date"),
    ("groups: [true]\n", "boolean"),
    ("groups: []\n", "non-empty list"),
    ("groups: staff\n", "non-empty list"),
    ("groups: {a: b}\n", "non-empty list"),
    ("groups: ['']\n", "valid group name"),
    ("groups: ['has space']\n", "valid group name"),
    ("groups: ['a,b']\n", "valid group name"),
    ("groups: [__public__]\n", "reserved"),
    ("groups: ['-leading-dash']\n", "valid group name"),
    ("groups: ['" + "x" * 129 + "']\n", "valid group name"),
    ("public: yes\n", "ambiguous"),
    ("public: 'true'\n", "true or false"),
    ("public: 1\n", "true or false"),
    ("public: false\n", "non-empty list"),
    ("public: true\ngroups: [a]\n", "not both"),
    ("owners: [a]\n", "unknown key"),
    ("- a\n- b\n", "expected a mapping"),
    ("", "expected a mapping"),
    ("groups: [a\n", "invalid ACL file"),
    ("---\ngroups: [a]\n---\npublic: true\n", "invalid ACL file"),
    ("groups: " + "[" * 500 + "]" * 500 + "\n", "nested too deeply"),
    ("groups: [a]\n" + "#" * 20_000 + "\n", "larger than"),
]


@pytest.mark.parametrize(("content", "expected"), GOOD)
def test_valid_acl_files(tmp_path: Path, content: str, expected: tuple[str, ...]) -> None:
    assert read_acl_file(write(tmp_path / ACL_FILE, content)).groups == expected


@pytest.mark.parametrize(("content", "problem"), BAD)
def test_invalid_acl_files_name_the_file_and_the_problem(tmp_path: Path, content: str, problem: str) -> None:
    path = write(tmp_path / ACL_FILE, content)
    with pytest.raises(UsageError) as err:
        read_acl_file(path)
    message = str(err.value)
    assert message.startswith(str(path)) and problem in message
    assert "\n" not in message


def test_the_alias_bomb_is_refused_without_expanding_it(tmp_path: Path) -> None:
    path = write(tmp_path / ACL_FILE, ALIAS_BOMB)
    tracemalloc.start()
    with pytest.raises(UsageError, match="aliases"):
        read_acl_file(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Memory, not time, shows the aliases were never expanded (and does not depend on the machine's load).
    assert peak < 5_000_000


def _dangling(folder: Path) -> None:
    (folder / ACL_FILE).symlink_to("nowhere.yaml")


def _directory(folder: Path) -> None:
    (folder / ACL_FILE).mkdir()


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / ACL_FILE)


def _link_to_valid(folder: Path) -> None:
    write(folder / "elsewhere.yaml", "public: true\n")
    (folder / ACL_FILE).symlink_to("elsewhere.yaml")


def _link_loop(folder: Path) -> None:
    (folder / ACL_FILE).symlink_to(ACL_FILE)


NOT_REGULAR: list[Callable[[Path], None]] = [_dangling, _directory, _fifo, _link_to_valid, _link_loop]


@pytest.mark.parametrize("make", NOT_REGULAR, ids=[m.__name__ for m in NOT_REGULAR])
def test_anything_but_a_regular_file_under_the_name_fails_its_folder(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """Never a fall back to the parent's ACL (or --public): the folder's documents are withheld."""
    write(tmp_path / ACL_FILE, "groups: [staff]\n")
    write(tmp_path / "secret" / "doc.txt", "x")
    write(tmp_path / "other.txt", "x")
    make(tmp_path / "secret")
    found = discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver((PUBLIC_GROUP,), "--public"))
    assert [(f.rel, f.acl_groups) for f in found.files] == [("other.txt", ("staff",))]
    reasons = dict(found.rejected)
    assert re.fullmatch(r"ACL file is (a symlink|not a regular file).*", reasons[str(tmp_path / "secret" / ACL_FILE)])
    assert "(secret/.docquery-acl.yaml) is refused" in reasons[str(tmp_path / "secret" / "doc.txt")]


NEAR_MISSES = [
    ".docquery-acl.yml",
    ".DocQuery-ACL.yaml",
    ".docquery-acl.YAML",
    "docquery-acl.yaml",
    ".docquery_acl.yaml",
    ".docquery-acls.yaml",
    ".docquery-acl.yaml.bak",
    ".docquery-acl.json",
    ".docquery-acl",
    ".docquery.acl.yaml",
    "DOCQUERY-ACL.YML",
    "\uff0edocquery-acl.yaml",  # fullwidth full stop
    ".docquery-acl.yaml~",
    ".docquery-acl.yaml.swp",
    "docquery acl.yml",
]


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_near_miss_names_fail_their_folder(tmp_path: Path, name: str) -> None:
    assert is_near_miss(name)
    write(tmp_path / "folder" / name, "groups: [hr]\n")
    write(tmp_path / "folder" / "doc.txt", "x")
    write(tmp_path / "folder" / "sub" / "deep.txt", "x")
    write(tmp_path / "elsewhere" / "ok.txt", "x")
    found = discover([tmp_path], filters=Filters(), shard=Shard(), acl=AclResolver((PUBLIC_GROUP,), "--public"))
    assert [f.rel for f in found.files] == ["elsewhere/ok.txt"]
    reasons = dict(found.rejected)
    assert reasons[str(tmp_path / "folder" / name)].startswith("looks like an ACL file")
    for doc in ("doc.txt", "sub/deep.txt"):
        assert reasons[str(tmp_path / "folder" / doc)].startswith("not indexed: the ACL file that governs it")


# Documents that only mention the file are not near misses.
ORDINARY = [
    ACL_FILE, "acl.yaml", "docquery.yaml", "notes-docquery-acl.txt", "README", "DocQuery ACL guide.md",
    "docquery-acl-howto.txt", "About DocQuery ACLs.pdf", "docquery_acl_design.docx", "DocQueryACLNotes.md",
    ".docquery-acl-test", "docquery-acl.yaml.md", "my.docquery-acl.yaml",
]  # fmt: skip


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_names_are_not_near_misses(name: str) -> None:
    assert not is_near_miss(name)


def test_every_acl_file_is_checked_even_where_no_file_is_selected(tmp_path: Path) -> None:
    write(tmp_path / ACL_FILE, "groups: [staff]\n")
    write(tmp_path / "a.md", "x")
    write(tmp_path / "other" / ACL_FILE, "groups: [NO]\n")
    write(tmp_path / "other" / "b.txt", "x")
    found = discover([tmp_path], filters=Filters(include=("*.md",)), shard=Shard(), acl=AclResolver(None, ""))
    assert [f.rel for f in found.files] == ["a.md"]
    assert [path for path, _ in found.rejected] == [str(tmp_path / "other" / ACL_FILE)]


_SCALARS = st.one_of(
    st.sampled_from(["yes", "No", "ON", "off", "~", "null", "true", "1", "0x1f", "1e3", ".inf", "2024-01-01", "''"]),
    st.from_regex(GROUP_PATTERN, fullmatch=True),
    st.text(min_size=1, max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(_SCALARS, min_size=1, max_size=4))
def test_generated_group_lists_are_names_or_errors(tmp_path: Path, items: list[str]) -> None:
    """Whatever a scalar resolves to in YAML, it is a valid name or the file is refused: never a
    boolean, null or number turned into a group name."""
    content = "groups: [" + ", ".join(items) + "]\n"
    path = write(tmp_path / ACL_FILE, content)
    try:
        groups = read_acl_file(path).groups
    except UsageError as exc:
        assert str(exc).startswith(str(path))
        return
    parsed = yaml.safe_load(content)["groups"]
    assert all(isinstance(g, str) for g in parsed), "a non-string became a group"
    assert set(groups) == {g.strip() for g in parsed}
