"""A bug in any command ends in one line (exit 1) that names the error's type and place, never its text."""

from __future__ import annotations

import pytest

import docquery.commands.config as config_command
from docquery.cli import main

CANARY = "SECRET-CANARY-7f3a"


@pytest.mark.parametrize(
    "error",
    [ValueError(f"invalid literal: {CANARY}"), KeyError(CANARY), RuntimeError(f"line one\n{CANARY}"), AssertionError()],
)
def test_an_unexpected_error_is_one_line_without_its_message(
    error: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    def broken(*_: object, **__: object) -> str:
        raise error

    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(config_command, "render_show", broken)
    assert main(["config", "show"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and CANARY not in err and "Traceback" not in err
    assert err.startswith(f"docquery: internal error ({type(error).__name__} at test_cli_errors.py:")
