"""The review's hostile corpora through the real CLI and Edge index."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from docquery.cli import build_parser
from docquery.config.settings import Settings
from ingest.cli import run as cli_run
from ingest.discover.acl import ACL_FILE
from ingest.report.summary import Report
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]


def cli(env: IngestEnv, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    args = build_parser().parse_args(["ingest", *argv])
    rc = cli_run(args, env.settings, embedder=env.embedder, index=env.index)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if "--json" in argv and out.strip() else out), err


def _hr_and_finance(docs: Path) -> None:
    write(docs / "hr" / ACL_FILE, "groups: [hr]\n")
    write(docs / "hr" / "salaries.txt", "Salaries: the board approved the new pay bands.")
    write(docs / "finance" / ACL_FILE, "groups: [staff]\n")
    write(docs / "finance" / "budget.txt", "Budget: travel is capped at 2,000 per quarter.")


def test_a_shortcut_into_hr_never_relabels_the_hr_document(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ingest_env
    _hr_and_finance(env.docs)
    rc, first, _ = cli(env, capsys, str(env.docs), "--json")
    assert rc == 0 and first["added"] == 2
    (env.docs / "finance" / "shortcut.txt").symlink_to("../hr/salaries.txt")
    (env.docs / "shortcut.txt").symlink_to("hr/salaries.txt")  # root level, under --public
    for extra in ((), ("--public",), ("--groups", "staff")):
        rc, report, _ = cli(env, capsys, str(env.docs), "--json", *extra)
        assert rc == 0 and (report["updated"], report["acl_updated"], report["unchanged"]) == (0, 0, 2)
        assert env.state()["salaries.txt"][3] == ("hr",)
        assert env.state()["budget.txt"][3] == ("staff",)


def test_a_symlink_loop_anywhere_is_a_bad_file_not_a_crash(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ingest_env
    _hr_and_finance(env.docs)
    (env.docs / "hr" / "deep").mkdir()
    (env.docs / "hr" / "deep" / "loop.txt").symlink_to("loop.txt")
    (env.docs / "finance" / "a.txt").symlink_to("b.txt")
    (env.docs / "finance" / "b.txt").symlink_to("a.txt")
    rc, report, err = cli(env, capsys, str(env.docs), "--json")
    assert rc == 1 and report["added"] == 2 and "Traceback" not in err
    assert sorted(Path(f["path"]).name for f in report["failed"]) == ["a.txt", "b.txt", "loop.txt"]
    assert {f["reason"] for f in report["failed"]} == {"symlink loop"}


@pytest.mark.parametrize(
    "make",
    [
        lambda d: (d / "hr" / ACL_FILE).unlink() or (d / "hr" / ACL_FILE).symlink_to("gone.yaml"),
        lambda d: (d / "hr" / ACL_FILE).unlink() or (d / "hr" / ACL_FILE).mkdir(),
        lambda d: write(d / "hr" / ACL_FILE, "groups: [NO, yes]\n"),
        lambda d: write(d / "hr" / ACL_FILE, "groups: [hr]\ngroups: [staff]\n"),
        lambda d: write(d / "hr" / ".docquery-acl.yml", "public: true\n"),
    ],
    ids=["dangling-link", "directory", "yaml-booleans", "duplicate-keys", "near-miss-name"],
)
def test_a_bad_acl_file_fails_its_folder_and_the_rest_is_indexed(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], make: Any
) -> None:
    env = ingest_env
    _hr_and_finance(env.docs)
    make(env.docs)
    rc, out, err = cli(env, capsys, str(env.docs), "--public", "--json")
    assert rc == 1 and out["added"] == 1 and "Traceback" not in err
    failed = {Path(f["path"]).name: f["reason"] for f in out["failed"]}
    assert "hr/.docquery-acl" in failed["salaries.txt"] and len(failed) == 2
    assert {Path(r.extra["path"]).name: r.acl_groups for r in env.index.list_documents()} == {"budget.txt": ("staff",)}


def _documentation_folder(docs: Path) -> None:
    write(docs / ACL_FILE, "groups: [staff]\n")
    write(docs / "README", "Project readme: how to build and run the tool.\n")
    write(docs / "AUTHORS", "Ada Lovelace\nGrace Hopper\n")
    write(docs / "guide.rst", "Guide\n=====\n\nInstall with the package manager.\n")
    write(docs / "guide.md", "# Guide\n\nThe markdown guide.\n")
    write(docs / "logo.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    write(docs / "style.css", "body { color: black }\n")
    write(docs / "notes.txt.gz", gzip.compress(b"compressed notes"))
    write(docs / "LICENSE-binary", b"\x00\x01\x02\x03" * 64)


SKIPPED = {
    "LICENSE-binary": "unsupported file type (no extension, and the content is not text)",
    "logo.png": "unsupported file type '.png'",
    "notes.txt.gz": "unsupported file type '.gz'",
    "style.css": "unsupported file type '.css'",
}


def test_unsupported_files_are_skipped_not_failures(ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = ingest_env
    _documentation_folder(env.docs)
    rc, predicted, _ = cli(env, capsys, str(env.docs), "--json", "--dry-run")
    assert rc == 0
    for attempt in range(2):  # exit 0 on every run, also when nothing changed
        rc, report, _ = cli(env, capsys, str(env.docs), "--json")
        assert rc == 0 and report["failed"] == []
        assert {Path(s["path"]).name: s["reason"] for s in report["skipped"]} == SKIPPED
        assert (report["added"], report["unchanged"]) == ((4, 0) if attempt == 0 else (0, 4))
    assert sorted(env.state()) == ["AUTHORS", "README", "guide.md", "guide.rst"]
    # The dry run predicted the real run.
    assert predicted["skipped"] == report["skipped"] and predicted["failed"] == []
    assert sorted(Path(p).name for p in predicted["plan"]["add"]) == ["AUTHORS", "README", "guide.md", "guide.rst"]
    # --strict makes the skips failures.
    rc, strict, _ = cli(env, capsys, str(env.docs), "--json", "--strict")
    assert rc == 1 and strict["skipped"] == []
    assert sorted(Path(f["path"]).name for f in strict["failed"]) == sorted(SKIPPED)


def test_supported_files_that_fail_still_exit_1_and_the_dry_run_predicts_them(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ingest_env
    write(env.docs / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "ok.txt", "fine")
    write(env.docs / "nul.txt", b"\x00\x01 binary \x00" * 50)
    write(env.docs / "fake.pdf", b"not a pdf at all")
    write(env.docs / "legacy.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512)
    write(env.docs / "huge.md", "x" * 300_000)
    write(env.docs / "photo.png", b"\x89PNG")
    settings = env.settings.model_copy(
        update={"ingest": env.settings.ingest.model_copy(update={"max_file_bytes": 200_000})}
    )
    env.settings = settings
    rc_dry, dry, _ = cli(env, capsys, str(env.docs), "--json", "--dry-run")
    rc, real, _ = cli(env, capsys, str(env.docs), "--json")
    assert rc == rc_dry == 1
    assert dry["failed"] == real["failed"] and dry["skipped"] == real["skipped"]
    assert sorted(Path(f["path"]).name for f in real["failed"]) == ["fake.pdf", "huge.md", "legacy.docx", "nul.txt"]
    assert [Path(s["path"]).name for s in real["skipped"]] == ["photo.png"]


HOSTILE_NAMES = [
    "\x1b[31mred\x1b[0m.txt",
    "\x1b]0;pwned\x07title.txt",
    "line\nfailed fake.txt: forged.txt",
    "cr\rover.txt",
    "bell\x07.txt",
    "back\x08space.txt",
    "rlo\u202etxt.exe.txt",
    "zwsp\u200b.txt",
    "nel\x85.txt",
    "csi\x9b2J.txt",
    "tab\tname.txt",
    "sep\u2028line.txt",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_untrusted_names_reach_the_terminal_escaped(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    env = ingest_env
    write(env.docs / ACL_FILE, "groups: [staff]\n")
    write(env.docs / name, b"\x00binary\x00" * 20)  # fails, so the name is printed with its reason
    write(env.docs / (name + ".png"), b"\x89PNG")  # skipped, printed too
    for extra in ((), ("--dry-run",)):
        rc, out, err = cli(env, capsys, str(env.docs), *extra)
        assert rc == 1
        for text in (out, err):
            assert not any(ch in text for ch in "\x1b\x07\x08\r\x85\x9b\u202e\u200b\u2028\t"), repr(text)
        lines = [ln for ln in out.splitlines() if ln.startswith(("failed", "skipped"))]
        assert len(lines) == 2, out


def test_a_usage_error_naming_a_hostile_path_is_one_escaped_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "secrets")
    bad = tmp_path / "docs\x1b[2J\nforged line"
    write(bad / "a.txt", "x")
    (tmp_path / "root").mkdir()
    argv = ["ingest", str(bad), "--public", "--acl-root", str(tmp_path / "root")]
    assert cli_run(build_parser().parse_args(argv), settings) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1 and "\\x1b[2J\\nforged line" in err


def test_the_report_renders_plan_entries_escaped() -> None:
    report = Report(dry_run=True, plan={"add": ["/c/\x1b[1mx\n.txt"]})
    report.fail("/c/\x1b]8;;http://evil\x07link", "bad\nreason")
    report.skip("/c/\u202eevil", "unsupported file type '.\x1b'")
    console = Console(record=True, width=200, force_terminal=False)
    report.render(console)
    text = console.export_text()
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[1mx\\n.txt" in text
