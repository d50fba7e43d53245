"""A data dir that cannot be used (a file, a folder this user may not read) is one line naming
DOCQUERY_DATA_DIR and the path, and exit 2, for ``ask``, ``serve`` and ``ingest``: never an internal error,
an engine's errno, or "the index is empty".

The tests run as root, which reads any folder: the commands run under ``setpriv`` without
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so a mode 000 folder refuses them as it refuses any user.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.wiring import build_index
from tests.support.ingest_fixtures import ModelStandIn

EXIT_USAGE = 2
_NO_DAC = ["--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search", "--"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


COMMANDS = {
    "ask": ["ask", "What is the leave policy?", "--as-groups", "staff"],
    "serve": ["serve", "--port", "0"],
    "ingest": ["ingest", "--public", "corpus"],
}


def _run(tmp_path: Path, data_dir: Path, command: str, *, drop_dac: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(DOCQUERY_DATA_DIR=str(data_dir), DOCQUERY_SECRETS_DIR=str(tmp_path / "none"), HF_HUB_OFFLINE="1")
    env.update(DOCQUERY_LOG_FORMAT="json", DOCQUERY_METRICS_PORT=str(_free_port()))
    (tmp_path / "corpus").mkdir(exist_ok=True)
    (tmp_path / "corpus" / "a.txt").write_text("The canteen opens at noon.")
    prefix = ["setpriv", *_NO_DAC] if drop_dac and os.geteuid() == 0 else []
    cmd = [*prefix, sys.executable, "-m", "docquery.cli", *COMMANDS[command]]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)


def _one_line(got: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in got.stderr
    lines = [line for line in got.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, got.stderr[-2000:]
    return lines[0]


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root without setpriv reads any folder")
    data = tmp_path / "data"
    build_index(Settings(data_dir=data, secrets_dir=tmp_path / "none"), ModelStandIn()).close()
    data.chmod(0)
    yield data
    data.chmod(0o755)  # so pytest can remove it


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unreadable_data_dir_names_the_setting_and_the_path(tmp_path: Path, locked: Path, command: str) -> None:
    got = _run(tmp_path, locked, command, drop_dac=True)
    assert got.returncode == EXIT_USAGE, got.stderr[-2000:]
    line = _one_line(got)
    assert f"DOCQUERY_DATA_DIR={locked}: permission denied on {locked}" in line
    assert "internal error" not in line and "Errno" not in line


def test_an_unreadable_collection_folder_is_named_too(tmp_path: Path, locked: Path) -> None:
    locked.chmod(0o755)
    collection = locked / "collections" / "docquery"
    collection.chmod(0)
    try:
        got = _run(tmp_path, locked, "ask", drop_dac=True)
    finally:
        collection.chmod(0o755)
    assert got.returncode == EXIT_USAGE, got.stderr[-2000:]
    assert f"permission denied on {collection}" in _one_line(got)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_data_dir_that_is_a_file_says_so(tmp_path: Path, command: str) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("x")
    got = _run(tmp_path, a_file, command)
    assert got.returncode == EXIT_USAGE, got.stderr[-2000:]
    assert f"DOCQUERY_DATA_DIR={a_file} is a file, not a folder" in _one_line(got)
    assert a_file.read_text() == "x"
