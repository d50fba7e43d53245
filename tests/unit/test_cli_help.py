"""``docquery --version``, and help text for every option of every command."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from docquery.cli import build_parser, docquery_version, main
from docquery.config.settings import Settings
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.fakes import HashEmbedder


def _parsers(parser: argparse.ArgumentParser, name: str = "docquery") -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            for sub_name, sub in action.choices.items():
                assert sub_name in helped, f"{name} {sub_name} has no help line in `{name} --help`"
                out.extend(_parsers(sub, f"{name} {sub_name}"))
    return out


def test_every_option_of_every_command_has_help() -> None:
    parsers = _parsers(build_parser())
    names = {name for name, _ in parsers}
    assert {"docquery ask", "docquery serve", "docquery ingest", "docquery eval retrieval"} <= names
    for name, parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            what = "/".join(action.option_strings) or action.dest
            assert action.help and action.help is not argparse.SUPPRESS, f"{name}: {what} has no help"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"docquery {docquery_version()}"
    assert docquery_version()[0].isdigit()


def test_a_path_with_nothing_to_index_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="ingest")
    full, empty = tmp_path / "full", tmp_path / "empty"
    (full / "sub").mkdir(parents=True)
    empty.mkdir()
    (full / "sub" / "a.md").write_text("# A\n\nSome text.")
    # Parsed in this process: the warnings are the subject, not the parse process.
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "none", ingest={"parse_process": "off"})
    opts = IngestOptions(paths=(full, full / "sub", empty), groups=("g",))
    report = run_ingest(settings, opts, embedder=HashEmbedder())
    assert report.ok and report.added == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{empty} holds no file to index"]

    caplog.clear()
    run_ingest(settings, IngestOptions(paths=(full,), groups=("g",), filters=_only("*.pdf")), embedder=HashEmbedder())
    assert [r.getMessage() for r in caplog.records] == [f"{full} holds no file to index after --include/--exclude"]


def _only(glob: str) -> object:
    from ingest.discover.walk import Filters

    return Filters(include=(glob,))
