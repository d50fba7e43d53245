"""Uploaded file names and groups: hostile names are refused (never repaired), and groups are split on commas
with nothing trimmed, each by the ingest's group rule."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.core.collection import PUBLIC_GROUP, is_valid_group_name
from docquery.core.uploads import tenant_root, upload_document_id
from docquery.validation import InvalidRequest, upload_file_name, upload_groups

MAX = 64


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../etc/passwd",
        "a/b.txt",
        "a\\b.txt",
        "/abs.txt",
        "x\x00.txt",
        "bell\x07.txt",
        "esc\x1b[31m.txt",
        "new\nline.txt",
        "tab\t.txt",
        "del\x7f.txt",
        "c1\x85.txt",
        "rlo\u202etxt.exe",
        "zw\u200bsp.txt",
        "bom\ufeff.txt",
        "ls\u2028.txt",
        " lead.txt",
        "trail.txt ",
        "nbsp.txt\u00a0",
        "priv\ue000.txt",
        "lone\ud800.txt",
        "x" * (MAX + 1),
        "é" * (MAX // 2 + 1),  # the bound is in UTF-8 bytes
    ],
)
def test_hostile_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        upload_file_name(name, MAX, "files[0]")
    assert caught.value.field == "files[0]"
    assert len(name) < 3 or name not in str(caught.value)  # never quoted


@pytest.mark.parametrize(
    "name", ["notes.txt", "Quarterly report 2024.pdf", "été.md", "README", ".env.txt", "日本.html"]
)
def test_plain_names_pass_unchanged(name: str) -> None:
    assert upload_file_name(name, MAX, "files[0]") == name


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80))
def test_an_accepted_name_is_one_safe_segment(name: str) -> None:
    try:
        got = upload_file_name(name, MAX, "files[0]")
    except InvalidRequest:
        return
    assert got == name and got not in (".", "..") and "/" not in got and "\\" not in got
    assert len(got.encode("utf-8")) <= MAX and got == got.strip()
    assert all(unicodedata.category(c)[0] != "C" and unicodedata.category(c) not in ("Zl", "Zp") for c in got)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("eng, hr", "group 2"),
        (" eng", "group 1"),
        ("eng,", "group 2"),
        (",eng", "group 1"),
        ("", "group 1"),
        ("eng,,hr", "group 2"),
        ("eng,hr\n", "group 2"),
        (PUBLIC_GROUP, "reserved"),
        ("eng;hr", "group 1"),
    ],
)
def test_groups_are_split_on_commas_and_never_trimmed(value: str, says: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        upload_groups(value)
    assert caught.value.field == "groups" and says in caught.value.reason


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=5))
def test_groups_pass_only_when_every_name_is_valid(names: list[str]) -> None:
    value = ",".join(names)
    parts = value.split(",")
    valid = all(is_valid_group_name(p) for p in parts)
    try:
        got = upload_groups(value)
    except InvalidRequest:
        assert not valid
        return
    assert valid and set(got) == set(parts)


def test_upload_ids_are_namespaced_by_tenant_and_never_a_corpus_id() -> None:
    from docquery.core.collection import document_id

    key = b"k" * 32
    a = upload_document_id("acme", "plan.txt", key)
    assert a == upload_document_id("acme", "plan.txt", key)
    assert a != upload_document_id("globex", "plan.txt", key)
    assert a != upload_document_id("acme", "plan.txt", b"j" * 32)
    assert a != document_id("plan.txt", key) and a != document_id("acme\x1fplan.txt", key)
    assert tenant_root("acme") != tenant_root("globex") and "acme" not in tenant_root("acme")


@pytest.mark.parametrize(
    ("corpus", "says"),
    [
        ("not json", "not JSON"),
        ('{"path": "/a/b.txt", "root": "/a"}', "one {path, root} object per file"),
        ("[]", "one {path, root} object per file"),
        ('[{"path": "/a/b.txt"}]', "path and root"),
        ('[{"path": "a/b.txt", "root": "/a"}]', "absolute, normalised"),
        ('[{"path": "/a/../etc/b.txt", "root": "/a"}]', "absolute, normalised"),
        ('[{"path": "/a//b.txt", "root": "/a"}]', "absolute, normalised"),
        ('[{"path": "/x/b.txt", "root": "/a"}]', "under root"),
        ('[{"path": "/a/b.txt", "root": "/a/b.txt"}]', "under root"),
        ('[{"path": "/a/c.txt", "root": "/a"}]', "end with the file's name"),
        ('[{"path": "/a/b\\u001b.txt", "root": "/a"}]', "control character"),
        ('[{"path": 7, "root": "/a"}]', "path of 1 to"),
    ],
)
def test_a_hand_over_names_each_file_where_it_is_or_is_refused(corpus: str, says: str) -> None:
    from docquery.api.errors import ApiError
    from docquery.api.uploads.handover import corpus_files

    with pytest.raises(ApiError) as caught:
        corpus_files(corpus, ["b.txt"])
    assert caught.value.status == 422 and "corpus" in caught.value.message and says in caught.value.message


def test_a_hand_over_is_cited_as_a_direct_run_cites_it() -> None:
    from docquery.api.uploads.handover import corpus_files

    (got,) = corpus_files('[{"path": "/srv/share/hr/leave.md", "root": "/srv/share"}]', ["leave.md"])
    assert (got.path, got.root, got.cited_as) == ("/srv/share/hr/leave.md", "/srv/share", "share/hr/leave.md")
