"""Ingest counts the HTML pages it read whole because no main content was found."""

from __future__ import annotations

import json

import pytest

from docquery.cli import build_parser
from ingest.cli import run as cli_run
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]

WITH_MAIN = """<html><head><title>Guide</title></head><body><nav><a href="/">Home</a> | <a>Next topic</a></nav>
<main><h1>Guide</h1><p>Badges are worn at all times inside the office building.</p></main>
<footer>Copyright the web team</footer></body></html>"""
WITHOUT = "<html><body><p>Meeting notes: the quarterly review moves to Thursday.</p></body></html>"


def test_pages_read_whole_are_counted_in_the_report(ingest_env: IngestEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = ingest_env
    write(env.docs / "guide.html", WITH_MAIN)
    write(env.docs / "notes.html", WITHOUT)
    args = build_parser().parse_args(["ingest", str(env.docs), "--groups", "staff", "--json"])
    assert cli_run(args, env.settings, embedder=env.embedder, index=env.index) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["html_whole_body"] == 1
    assert report["added"] == 2
