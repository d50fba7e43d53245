"""#22.3: every credential a client uses is read through the one secret source, on every use."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery.secrets import FileSecretSource, secret_getter
from docquery.settings import Settings
from docquery.wiring import build_index
from tests.support.fakes import HashEmbedder
from tests.support.qdrant_stub import qdrant_stub


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_qdrant_key_is_read_through_the_source_and_rotates(tmp_path: Path) -> None:
    key_file = tmp_path / "qdrant-api-key"
    key_file.write_text("qdrant-key-one")
    clock = Clock()
    source = FileSecretSource(tmp_path, clock=clock)
    with qdrant_stub() as (url, seen):
        settings = Settings(secrets_dir=tmp_path, data_dir=tmp_path / "data", qdrant={"url": url})
        with pytest.warns(UserWarning, match="insecure"):
            index = build_index(settings, HashEmbedder(), secrets=source)
        try:
            assert seen and set(seen) == {"Bearer qdrant-key-one"}
            tmp = tmp_path / "new"
            tmp.write_text("qdrant-key-two")
            tmp.replace(key_file)
            clock.now = 10.0
            before = len(seen)
            index.read_meta()
            assert seen[before:] and set(seen[before:]) == {"Bearer qdrant-key-two"}
        finally:
            index.close()


def test_no_qdrant_key_sends_no_credential(tmp_path: Path) -> None:
    with qdrant_stub() as (url, seen):
        settings = Settings(secrets_dir=tmp_path, data_dir=tmp_path / "data", qdrant={"url": url})
        index = build_index(settings, HashEmbedder(), secrets=FileSecretSource(tmp_path))
        index.close()
    assert seen and set(seen) == {""}


def test_secret_getter_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        secret_getter(FileSecretSource(tmp_path), "../qdrant-api-key")
