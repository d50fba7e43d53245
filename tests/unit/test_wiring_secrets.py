"""#22.3: every credential a client uses is read through the one secret source, on every use."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from docquery.domain import Prompt
from docquery.secrets import FileSecretSource, secret_getter
from docquery.settings import Settings
from docquery.wiring import build_components, build_index
from tests.support.fakes import HashEmbedder
from tests.support.qdrant_stub import qdrant_stub
from tests.support.standins.openai_server import StandInConfig, StandInOpenAIServer


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


def test_llm_and_embedder_keys_are_read_through_the_source_on_every_call(tmp_path: Path) -> None:
    """The components a service builds: each client reads its key through the one source, per call."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "llm-api-key").write_text("llm-one")
    (secrets / "embedder-api-key").write_text("emb-one")
    clock = Clock()
    config = StandInConfig(api_keys={"llm-one", "llm-two", "emb-one", "emb-two"}, embedding_dim=16)
    with StandInOpenAIServer(config) as standin:
        settings = Settings(
            data_dir=tmp_path / "data",
            secrets_dir=secrets,
            llm={"base_url": standin.base_url, "model": "standin-model", "max_retries": 0},
            embedder={"kind": "openai", "base_url": standin.base_url, "model": "m", "dimension": 16},
        )
        components = build_components(settings, secrets=FileSecretSource(secrets, clock=clock))
        try:
            prompt = Prompt(question="q", sources=(), messages=({"role": "user", "content": "q"},))

            async def ask() -> str:
                try:
                    return await components.generator.complete(prompt)
                finally:
                    await components.release_loop_resources()

            components.embedder.embed(["a text"])
            asyncio.run(ask())
            assert standin.stats.auth_seen == ["emb-one", "llm-one"]
            for name, value in (("llm-api-key", "llm-two"), ("embedder-api-key", "emb-two")):
                (secrets / f".{name}").write_text(value)
                (secrets / f".{name}").replace(secrets / name)
            clock.now = 10.0
            components.embedder.embed(["a text"])
            asyncio.run(ask())
            assert standin.stats.auth_seen[2:] == ["emb-two", "llm-two"]
            assert standin.stats.unauthorized == 0
        finally:
            components.close()
