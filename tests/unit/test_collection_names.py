"""Collection names are one safe path segment: the flag and the setting refuse anything else (exit 2, one line)."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ingest.cli as ingest_cli
from docquery.cli import build_parser, main
from docquery.config.settings import Settings, SettingsError
from docquery.core.collection import is_valid_collection_name
from docquery.core.errors import BusyError
from docquery.runtime.preflight import edge_collection

HOSTILE = [
    "../../escaped",
    "..",
    ".",
    "",
    "a/b",
    "/abs",
    "a\\b",
    "a\x1b[31mred",
    "a\nforged line",
    "a\x00b",
    "café",
    "ａｂｃ",  # fullwidth letters: "letters" means ASCII ones
    "a b",
    "docs.v2",
    "-flag",
    "_x",
    "a" * 65,
]
VALID = ["docquery", "a", "A1", "docs-2024", "hr_v2", "0", "a" * 64]
_ALLOWED = string.ascii_letters + string.digits + "-_"


@given(st.text(min_size=1, max_size=80))
def test_a_name_is_valid_only_when_it_matches_the_rule(name: str) -> None:
    expected = 1 <= len(name) <= 64 and name[0] in _ALLOWED[:62] and all(c in _ALLOWED for c in name)
    assert is_valid_collection_name(name) is expected


@pytest.mark.parametrize("name", VALID)
def test_valid_names_are_accepted_by_the_setting(name: str, tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path, qdrant={"collection": name}).qdrant.collection == name


@pytest.mark.parametrize("name", HOSTILE)
def test_the_setting_refuses_a_bad_name_without_echoing_it(name: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings(data_dir=tmp_path, qdrant={"collection": name})
    message = str(caught.value)
    assert "DOCQUERY_QDRANT__COLLECTION must be 1 to 64 letters" in message
    assert "\n" not in message and "\x1b" not in message and (not name or len(name) < 3 or name not in message)


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("command", ["ingest", "ask"])
def test_the_flag_refuses_a_bad_name_in_one_line_and_writes_nothing(
    name: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "deep" / "data"
    docs = tmp_path / "docs"
    docs.mkdir()
    data.parent.mkdir()  # "../../escaped" from data/collections/ would land in it
    (docs / "a.txt").write_text("a note")
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(data))
    argv = [str(docs), "--groups", "staff"] if command == "ingest" else ["a question?"]
    assert main([command, *argv, f"--collection={name}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--collection: must be 1 to 64 letters" in err
    assert "\x1b" not in err and "Traceback" not in err
    assert not data.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["deep", "docs"]
    assert list((tmp_path / "deep").iterdir()) == []


@pytest.mark.parametrize("name", ["../../escaped", "a\x1b[31mred", ""])
def test_the_environment_variable_refuses_a_bad_name(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_QDRANT__COLLECTION", name)
    assert main(["ingest", str(tmp_path), "--groups", "staff"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DOCQUERY_QDRANT__COLLECTION must be" in err and "\x1b" not in err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("name", HOSTILE[:4])
def test_the_embedded_path_is_never_built_from_a_bad_name(name: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    if name:  # "" means "the configured one"
        with pytest.raises(Exception, match="collection name must be"):
            edge_collection(settings, name)


@pytest.mark.parametrize("hostile", ["\x1b[31m", "\n", "\u202e", "\x07"])
def test_the_busy_line_is_escaped(
    hostile: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def busy(*_: object, **__: object) -> None:
        raise BusyError(f"the embedded index {tmp_path}/x{hostile}y is open in pid 1")

    monkeypatch.setattr(ingest_cli, "run_ingest", busy)
    args = build_parser().parse_args(["ingest", str(tmp_path), "--groups", "staff"])
    assert ingest_cli.run(args, Settings(data_dir=tmp_path)) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and hostile not in err.rstrip("\n") and "x\\" in err
