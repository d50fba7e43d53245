"""Prod reading secret files checks the secrets dir first and says, in one line, what is wrong with it.

Before, a missing, non-directory or unreadable dir was reported as "put api-keys.json in the secrets dir"
(after an ERROR line blaming the file), without naming the dir.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from docquery.api.app import create_app
from docquery.cli import main as cli_main
from docquery.config.settings import Settings
from docquery.core.errors import ConfigError
from docquery.secrets import SecretsDirError, build_secret_source
from docquery.secrets.files import directory_problem

ROOT = os.geteuid() == 0


def _missing(tmp: Path) -> Path:
    return tmp / "nope"


def _a_file(tmp: Path) -> Path:
    (tmp / "file").write_text("x")
    return tmp / "file"


def _under_a_file(tmp: Path) -> Path:
    return _a_file(tmp) / "secrets"


def _with_mode(mode: int) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        d = tmp / f"mode-{mode:o}"
        d.mkdir()
        (d / "api-keys.json").write_text("[]")
        d.chmod(mode)
        return d

    return make


# (how to make the dir, what the line must say)
CASES = [
    (_missing, "does not exist"),
    (_a_file, "is not a directory"),
    (_under_a_file, "is not a directory (a part of its path is a file)"),
    (_with_mode(0o000), "cannot be read (permission denied)"),
    (_with_mode(0o100), "cannot be read (permission denied)"),  # searchable, not listable
    (_with_mode(0o400), "cannot be read (permission denied)"),  # listable, not searchable: no file opens
]


@pytest.fixture(autouse=True)
def _modes_bind_root_too(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Root reads any directory, so as root the owner's mode bits stand in for what a service user gets."""
    if ROOT:

        def access(path: str | os.PathLike[str], mode: int) -> bool:
            owner = (Path(path).stat().st_mode >> 6) & 0o7
            return owner & mode == mode

        monkeypatch.setattr("docquery.secrets.files.os.access", access)
    yield


def _prod(tmp_path: Path, secrets_dir: Path) -> Settings:
    return Settings(profile="prod", data_dir=tmp_path / "data", secrets_dir=secrets_dir)


@pytest.mark.parametrize(("make", "problem"), CASES)
def test_prod_names_the_dir_and_what_is_wrong(tmp_path: Path, make: Callable[[Path], Path], problem: str) -> None:
    directory = make(tmp_path)
    with pytest.raises(SecretsDirError) as info:
        build_secret_source(_prod(tmp_path, directory))
    message = str(info.value)
    assert message.startswith(f"the secrets dir {directory} (DOCQUERY_SECRETS_DIR) {problem}: ")
    assert "\n" not in message


@pytest.mark.slow  # serve binds its API port
@pytest.mark.parametrize(("make", "problem"), CASES)
def test_serve_prints_one_line_and_exits_2(
    tmp_path: Path,
    make: Callable[[Path], Path],
    problem: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(make(tmp_path)))
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_METRICS_PORT", "0")  # 9464 may be held by a running `docquery serve`
    assert cli_main(["serve", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert problem in err
    assert "api-keys.json" not in err


def test_a_relative_dir_is_shown_as_a_full_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SecretsDirError, match=f"the secrets dir {tmp_path / 'rel'} "):
        build_secret_source(_prod(tmp_path, Path("rel")))


@pytest.mark.skipif(ROOT, reason="root reaches any directory")
def test_a_dir_behind_an_unsearchable_parent(tmp_path: Path) -> None:
    (tmp_path / "locked" / "secrets").mkdir(parents=True)
    (tmp_path / "locked").chmod(0o000)
    try:
        assert directory_problem(tmp_path / "locked" / "secrets") == (
            "cannot be reached (permission denied on a directory above it)"
        )
    finally:
        (tmp_path / "locked").chmod(0o700)


def test_a_good_dir_passes(tmp_path: Path) -> None:
    assert directory_problem(_with_mode(0o500)(tmp_path)) is None
    assert build_secret_source(_prod(tmp_path, tmp_path)) is not None


@pytest.mark.parametrize(("make", "problem"), CASES[:3])
def test_dev_does_not_insist(tmp_path: Path, make: Callable[[Path], Path], problem: str) -> None:
    # dev runs without a secrets dir (the default /vault/secrets) on the env fallback.
    assert build_secret_source(Settings(data_dir=tmp_path / "data", secrets_dir=make(tmp_path))) is not None


def test_the_auth_refusal_gives_the_full_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secrets").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        create_app(_prod(tmp_path, Path("secrets")))
    assert f"put api-keys.json in the secrets dir {tmp_path / 'secrets'} (DOCQUERY_SECRETS_DIR)" in str(info.value)
