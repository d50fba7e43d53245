"""The ``release:`` key of an ACL file: generated valid entries parse to what they say, generated
malformed ones refuse the whole file, and only the governing file's releases reach a document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.discover.acl import ACL_FILE, AclResolver, Broken, Found, read_acl_file
from ingest.discover.globs import glob_match
from ingest.discover.release import RELEASABLE, Release, released
from ingest.model import UsageError
from tests.support.ingest_fixtures import write

_GLOB = st.from_regex(r"(\./)?([a-z*?]{1,6}/){0,2}[a-z*?.]{1,8}/?", fullmatch=True).filter(lambda g: ".." not in g)
_ENTRY = st.tuples(st.sampled_from(RELEASABLE), st.none() | st.lists(_GLOB, min_size=1, max_size=3))
_REL = st.from_regex(r"([a-z]{1,4}/){0,3}[a-z]{1,5}\.(md|txt)", fullmatch=True)
_HEALTH = [HealthCheck.function_scoped_fixture]


def _yaml(entries: list[tuple[str, list[str] | None]], groups: str = "groups: [staff]\n") -> str:
    items = [{"reason": r} if p is None else {"reason": r, "paths": p} for r, p in entries]
    return groups + "release: " + json.dumps(items) + "\n"  # JSON flow style is YAML


@settings(max_examples=150, deadline=None, suppress_health_check=_HEALTH)
@given(entries=st.lists(_ENTRY, min_size=1, max_size=4), rel=_REL)
def test_generated_releases_parse_and_cover_what_their_globs_match(
    tmp_path: Path, entries: list[tuple[str, list[str] | None]], rel: str
) -> None:
    acl = read_acl_file(write(tmp_path / ACL_FILE, _yaml(entries)))
    assert acl.groups == ("staff",)
    assert acl.releases == tuple(Release(r, () if p is None else tuple(p)) for r, p in entries)
    expected = {r for r, p in entries if p is None or any(glob_match(g, rel) for g in p)}
    assert released(acl.releases, rel) == tuple(sorted(expected))


_BAD_ENTRY = st.one_of(
    st.fixed_dictionaries({"reason": st.text(max_size=12).filter(lambda r: r not in RELEASABLE)}),
    st.fixed_dictionaries({"paths": st.lists(_GLOB, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"reason": st.sampled_from(RELEASABLE), "paths": st.just([])}),
    st.fixed_dictionaries({"reason": st.sampled_from(RELEASABLE), "paths": st.sampled_from(["*", 1, None, True])}),
    st.fixed_dictionaries(
        {"reason": st.sampled_from(RELEASABLE), "paths": st.lists(st.sampled_from(["/abs/*", "../up", "a/../b", ""]))}
    ).filter(lambda e: bool(e["paths"])),
    st.fixed_dictionaries({"reason": st.sampled_from(RELEASABLE), "until": st.text(min_size=1, max_size=5)}),
    st.sampled_from(["injection", 3, None, ["injection"]]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=_HEALTH)
@given(good=st.lists(_ENTRY, max_size=2), bad=_BAD_ENTRY, at=st.integers(min_value=0, max_value=2))
def test_one_malformed_entry_refuses_the_whole_file(
    tmp_path: Path, good: list[tuple[str, list[str] | None]], bad: object, at: int
) -> None:
    items: list[object] = [{"reason": r} if p is None else {"reason": r, "paths": p} for r, p in good]
    items.insert(min(at, len(items)), bad)
    path = write(tmp_path / ACL_FILE, "groups: [staff]\nrelease: " + json.dumps(items) + "\n")
    with pytest.raises(UsageError) as err:
        read_acl_file(path)
    message = str(err.value)
    assert message.startswith(str(path)) and "\n" not in message


@pytest.mark.parametrize("value", ["release: []\n", "release: {reason: secret}\n", "release: secret\n"])
def test_release_must_be_a_non_empty_list(tmp_path: Path, value: str) -> None:
    with pytest.raises(UsageError, match="'release' must be a non-empty list"):
        read_acl_file(write(tmp_path / ACL_FILE, "public: true\n" + value))


def test_a_release_alone_is_not_an_acl(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="non-empty list of group names"):
        read_acl_file(write(tmp_path / ACL_FILE, "release: [{reason: secret}]\n"))


def test_only_the_governing_file_releases(tmp_path: Path) -> None:
    write(tmp_path / ACL_FILE, _yaml([(r, None) for r in RELEASABLE]))
    write(tmp_path / "team" / ACL_FILE, _yaml([("secret", ["keys/*"])]))
    write(tmp_path / "open" / "x.md", "x")
    resolver = AclResolver(None, "--groups")
    resolver.add_root(tmp_path)
    top = resolver.resolve(tmp_path / "open" / "x.md")
    assert isinstance(top, Found) and top.released_for(tmp_path / "open" / "x.md") == RELEASABLE
    team = resolver.resolve(tmp_path / "team" / "keys" / "a.md")
    assert isinstance(team, Found) and team.origin == f"team/{ACL_FILE}"
    assert team.released_for(tmp_path / "team" / "keys" / "a.md") == ("secret",)
    assert team.released_for(tmp_path / "team" / "a.md") == (), "the file above does not add its releases"


def test_files_above_the_root_and_the_fallback_release_nothing(tmp_path: Path) -> None:
    write(tmp_path / ACL_FILE, _yaml([(r, None) for r in RELEASABLE]))
    resolver = AclResolver(("staff",), "--groups")
    resolver.add_root(tmp_path / "corpus")
    found = resolver.resolve(tmp_path / "corpus" / "a.md")
    assert found == Found(("staff",), "--groups") and found.released_for(tmp_path / "corpus" / "a.md") == ()


def test_a_malformed_release_breaks_its_folder(tmp_path: Path) -> None:
    write(tmp_path / "team" / ACL_FILE, "groups: [staff]\nrelease: [{reason: everything}]\n")
    resolver = AclResolver(("staff",), "--groups")
    resolver.add_root(tmp_path)
    found = resolver.resolve(tmp_path / "team" / "a.md")
    assert isinstance(found, Broken) and "'reason' must be one of" in found.reason
