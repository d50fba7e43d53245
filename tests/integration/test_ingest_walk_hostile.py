"""Hostile trees through the real CLI and Edge index: names that are not UTF-8, folders that cannot be listed."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from docquery.cli import build_parser
from ingest.cli import run as cli_run
from ingest.discover.acl import ACL_FILE
from ingest.report.terminal import safe
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]

NOT_UTF8 = "file name is not valid UTF-8"


def cli(env: IngestEnv, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    args = build_parser().parse_args(["ingest", *argv])
    rc = cli_run(args, env.settings, embedder=env.embedder, index=env.index)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if "--json" in argv and out.strip() else out), err


@pytest.mark.parametrize("raw", [b"caf\xe9.txt", b"\xff\x1b]0;owned\x07.txt", b"x\xc3\n.md"])
@pytest.mark.parametrize("mode", [(), ("--dry-run",), ("--shard", "0/2"), ("--shard", "1/2")])
def test_a_name_that_is_not_utf8_fails_alone_and_the_rest_is_indexed(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], raw: bytes, mode: tuple[str, ...]
) -> None:
    env = ingest_env
    write(env.docs / ACL_FILE, "groups: [staff]\n")
    oks = [f"ok{i}.txt" for i in range(6)]  # some in each shard
    for name in oks:
        write(env.docs / name, f"the note {name} is fine")
    bad = env.docs / os.fsdecode(raw)
    write(bad, "text under a Latin-1 name")
    rc, report, _ = cli(env, capsys, str(env.docs), "--json", *mode)
    mine = [r for r in report["failed"] if r["path"] == str(bad)]
    assert [r["reason"].split(";")[0] for r in mine] in ([NOT_UTF8], [])  # [] only in the other shard
    assert rc == (1 if mine else 0)
    if "--dry-run" in mode:
        assert str(bad) not in report["plan"]["add"] and len(report["plan"]["add"]) == len(oks)
    if not mode:
        assert report["added"] == len(oks) and len(mine) == 1
        rc, text, err = cli(env, capsys, str(env.docs))  # plain lines: the name shown escaped
        assert rc == 1 and f"failed {safe(str(bad))}: {NOT_UTF8}" in text
        assert "\x1b" not in text + err and "\x07" not in text + err


def test_both_shards_together_report_the_bad_name_once(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ingest_env
    write(env.docs / ACL_FILE, "groups: [staff]\n")
    bad = env.docs / os.fsdecode(b"caf\xe9.txt")
    write(bad, "x")
    reports = [cli(env, capsys, str(env.docs), "--json", "--dry-run", "--shard", f"{i}/3")[1] for i in range(3)]
    assert sum(len(r["failed"]) for r in reports) == 1


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO, errno.ENAMETOOLONG])
def test_a_folder_that_cannot_be_listed_is_a_failed_entry_and_exit_1(
    ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    env = ingest_env
    write(env.docs / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "top.txt", "the top note")
    write(env.docs / "hr" / "lost.txt", "the lost note")
    hr = env.docs / "hr"
    real = os.scandir

    def scandir(path: str | int) -> object:  # root runs the tests, so chmod 000 would not stop it
        # The walk lists a folder through the descriptor it holds for it: name the folder that is.
        where = str(Path(f"/proc/self/fd/{path}").readlink()) if isinstance(path, int) else str(path)
        if where in (str(hr.resolve()), str(hr)):
            raise OSError(code, os.strerror(code), str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for mode in (("--dry-run",), ()):
        rc, report, _ = cli(env, capsys, str(env.docs), "--json", *mode)
        assert rc == 1
        assert report["failed"] == [{"path": str(hr), "reason": f"cannot list folder ({os.strerror(code)})"}]
    assert report["added"] == 1
    rc, text, _ = cli(env, capsys, str(env.docs))
    assert rc == 1 and f"failed {hr}: cannot list folder ({os.strerror(code)})" in text
