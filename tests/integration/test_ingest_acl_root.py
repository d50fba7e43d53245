"""The ACL root through the real CLI and Edge index: nothing above the corpus decides or blocks, a
declared root serves a share ingested one subfolder at a time, the reports name what decided each
document's ACL, and a refused ACL file fails its own subtree only (exit 1, the rest lands)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from docquery.cli import build_parser
from docquery.config.settings import IngestSettings, Settings
from ingest.cli import run as cli_run
from ingest.discover.acl import ACL_FILE
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]


def cli(
    env: IngestEnv, capsys: pytest.CaptureFixture[str], *argv: str, settings: Settings | None = None
) -> tuple[int, Any, str]:
    args = build_parser().parse_args(["ingest", *argv])
    rc = cli_run(args, settings or env.settings, embedder=env.embedder, index=env.index)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if "--json" in argv and out.strip() else out), err


def _share(share: Path) -> None:
    write(share / "hr" / ACL_FILE, "groups: [hr]\n")
    write(share / "hr" / "reviews" / "bob.txt", "Bob's review: exceeds expectations in every area.")
    write(share / "eng" / "notes.txt", "Engineering notes: the build runs nightly.")


# What someone who can write above the corpus may leave there: each must decide nothing and block nothing.
ABOVE = {
    "public": lambda d: write(d / ACL_FILE, "public: true\n"),
    "groups": lambda d: write(d / ACL_FILE, "groups: [everyone]\n"),
    "broken": lambda d: write(d / ACL_FILE, "groups: [a]\npublic: true\n"),
    "not-a-file": lambda d: (d / ACL_FILE).mkdir(),
    "dangling-link": lambda d: (d / ACL_FILE).symlink_to("nowhere.yaml"),
    "near-miss": lambda d: write(d / ".docquery-acl.yml", "public: true\n"),
}


@pytest.mark.parametrize("plant", list(ABOVE), ids=list(ABOVE))
@pytest.mark.parametrize("depth", [1, 2], ids=["parent", "grandparent"])
def test_acl_files_above_the_root_decide_nothing_and_block_nothing(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], plant: str, depth: int
) -> None:
    env = ingest_env
    corpus = env.docs / "share"
    _share(corpus)
    ABOVE[plant](corpus.parent if depth == 1 else env.docs.parent)
    rc, report, err = cli(env, capsys, str(corpus), "--groups", "staff", "--json")
    assert (rc, report["added"], report["failed"]) == (0, 2, []), err
    assert report["acl_from"] == {
        str(corpus / "hr" / "reviews" / "bob.txt"): f"hr/{ACL_FILE}",
        str(corpus / "eng" / "notes.txt"): "--groups",
    }
    acl = {name: state[3] for name, state in env.state().items()}
    assert acl == {"bob.txt": ("hr",), "notes.txt": ("staff",)}


def test_a_subfolder_of_a_declared_root_keeps_the_acl_above_it(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ingest_env
    share = env.docs
    _share(share)
    sub = share / "hr" / "reviews"
    # Without a root the PATH is the root: the share's hr file is above it and does not apply.
    rc, report, _ = cli(env, capsys, str(sub), "--public", "--json", "--dry-run")
    assert rc == 0 and report["acl_from"] == {str(sub / "bob.txt"): "--public"}
    # Declared on the command line, or in the settings: the share's hr file decides.
    for argv, settings in (
        (("--acl-root", str(share)), None),
        ((), env.settings.model_copy(update={"ingest": IngestSettings(acl_root=share)})),
    ):
        rc, report, _ = cli(env, capsys, str(sub), "--public", "--json", "--dry-run", *argv, settings=settings)
        assert rc == 0 and report["acl_from"] == {str(sub / "bob.txt"): f"hr/{ACL_FILE}"}
    link = env.docs.parent / "to-reviews"
    link.symlink_to(sub)
    rc, report, _ = cli(env, capsys, str(link), "--public", "--acl-root", str(share), "--json")
    assert rc == 0 and report["added"] == 1 and env.state()["bob.txt"][3] == ("hr",)


@pytest.mark.parametrize("outside", ["..", "../..", "/"])
def test_a_path_outside_the_declared_root_is_one_line_and_exit_2(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], outside: str
) -> None:
    env = ingest_env
    _share(env.docs)
    path = Path(outside) if outside == "/" else (env.docs / "hr" / outside)
    rc, out, err = cli(env, capsys, str(path), "--public", "--acl-root", str(env.docs / "hr"))
    assert rc == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "is outside the ACL root" in err
    rc, _, err = cli(env, capsys, str(env.docs), "--public", "--acl-root", str(env.docs / "nope"))
    assert rc == 2 and "is not a folder" in err
    assert env.state() == {}


def test_the_reports_name_what_decided_each_acl(ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = ingest_env
    _share(env.docs)
    rc, out, _ = cli(env, capsys, str(env.docs), "--public", "--dry-run")
    bob, notes = env.docs / "hr" / "reviews" / "bob.txt", env.docs / "eng" / "notes.txt"
    assert rc == 0
    assert f"plan add {bob} (acl from hr/{ACL_FILE})" in out.splitlines()
    assert f"plan add {notes} (acl from --public)" in out.splitlines()
    rc, out, _ = cli(env, capsys, str(env.docs), "--public")
    assert rc == 0
    assert {f"acl-from hr/{ACL_FILE}: 1 document(s)", "acl-from --public: 1 document(s)"} <= set(out.splitlines())


# Ways an ACL file inside the corpus is refused: each fails its own subtree only.
REFUSED = {
    "schema": lambda d: write(d / ACL_FILE, "groups: [hr]\npublic: true\n"),
    "yaml-booleans": lambda d: write(d / ACL_FILE, "groups: [NO, yes]\n"),
    "directory": lambda d: (d / ACL_FILE).unlink() or (d / ACL_FILE).mkdir(),
    "near-miss": lambda d: write(d / ".DocQuery-ACL.yml", "public: true\n"),
}


@pytest.mark.parametrize("breakage", list(REFUSED), ids=list(REFUSED))
def test_a_refused_acl_file_withdraws_its_subtree_and_the_rest_lands(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], breakage: str
) -> None:
    env = ingest_env
    _share(env.docs)
    write(env.docs / "eng" / ACL_FILE, "groups: [eng, staff]\n")
    rc, report, _ = cli(env, capsys, str(env.docs), "--json")
    assert rc == 0 and report["added"] == 2
    # The same run breaks hr's file and narrows eng's: the revocation must land.
    REFUSED[breakage](env.docs / "hr")
    write(env.docs / "eng" / ACL_FILE, "groups: [eng]\n")
    write(env.docs / "hr" / "reviews" / "carol.txt", "Carol's review: new this run.")
    rc, report, err = cli(env, capsys, str(env.docs), "--json")
    assert rc == 1 and "Traceback" not in err, "a partial run: exit 1, as for a failed file"
    failed = {Path(f["path"]).name: f["reason"] for f in report["failed"]}
    assert set(failed) >= {"bob.txt", "carol.txt"}
    assert all("is refused" in failed[name] for name in ("bob.txt", "carol.txt"))
    assert report["acl_previous"] == [
        {
            "path": str(env.docs / "hr" / "reviews" / "bob.txt"),
            "action": "withdrawn (the ACL file that governs its location is refused)",
        }
    ]
    assert {name: state[3] for name, state in env.state().items()} == {"notes.txt": ("eng",)}
    # Fixed: the next run indexes the subtree again.
    for entry in (env.docs / "hr").iterdir():
        if entry.name.lower().startswith((".docquery", ".DocQuery".lower())):
            entry.rmdir() if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    write(env.docs / "hr" / ACL_FILE, "groups: [hr]\n")
    rc, report, _ = cli(env, capsys, str(env.docs), "--json")
    assert rc == 0 and report["added"] == 2
    assert env.state()["bob.txt"][3] == env.state()["carol.txt"][3] == ("hr",)
