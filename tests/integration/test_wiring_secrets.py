"""Every credential a client uses is read through the one secret source, on every use."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.core.domain import Prompt
from docquery.core.errors import VectorIndexError
from docquery.secrets import FileSecretSource, secret_getter
from docquery.wiring import build_components, build_index
from tests.support.clock import ManualClock
from tests.support.fakes import HashEmbedder
from tests.support.standins.openai_server import StandInConfig, StandInOpenAIServer
from tests.support.standins.qdrant_rest import StandInQdrant


def test_the_qdrant_key_is_read_through_the_source_and_rotates(tmp_path: Path) -> None:
    key_file = tmp_path / "qdrant-api-key"
    key_file.write_text("qdrant-key-one")
    clock = ManualClock()
    source = FileSecretSource(tmp_path, clock=clock)
    embedder = HashEmbedder()
    stand_in = StandInQdrant(keys={"qdrant-key-one", "qdrant-key-two"}, model_id=embedder.model_id, dimension=64)
    with stand_in:
        settings = Settings(secrets_dir=tmp_path, data_dir=tmp_path / "data", qdrant={"url": stand_in.url})
        with pytest.warns(UserWarning, match="insecure"):
            index = build_index(settings, embedder, secrets=source)
        try:
            assert stand_in.seen and {s.key for s in stand_in.seen} == {"qdrant-key-one"}
            tmp = tmp_path / "new"
            tmp.write_text("qdrant-key-two")
            tmp.replace(key_file)
            clock.advance(10.0)
            before = len(stand_in.seen)
            index.read_meta()
            assert stand_in.seen[before:] and {s.key for s in stand_in.seen[before:]} == {"qdrant-key-two"}
        finally:
            index.close()


def test_no_qdrant_key_sends_no_credential(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    with StandInQdrant(keys={"some-key"}, model_id=embedder.model_id, dimension=64) as stand_in:
        settings = Settings(secrets_dir=tmp_path, data_dir=tmp_path / "data", qdrant={"url": stand_in.url})
        # The stand-in refuses a request without a key, as Qdrant does: what matters is that none was sent.
        with pytest.raises(VectorIndexError):
            build_index(settings, embedder, secrets=FileSecretSource(tmp_path)).close()
    assert stand_in.seen and {s.key for s in stand_in.seen} == {None}


def test_secret_getter_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        secret_getter(FileSecretSource(tmp_path), "../qdrant-api-key")


def test_llm_and_embedder_keys_are_read_through_the_source_on_every_call(tmp_path: Path) -> None:
    """The components a service builds: each client reads its key through the one source, per call."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "llm-api-key").write_text("llm-one")
    (secrets / "embedder-api-key").write_text("emb-one")
    clock = ManualClock()
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
            clock.advance(10.0)
            components.embedder.embed(["a text"])
            asyncio.run(ask())
            assert standin.stats.auth_seen[2:] == ["emb-two", "llm-two"]
            assert standin.stats.unauthorized == 0
        finally:
            components.close()
