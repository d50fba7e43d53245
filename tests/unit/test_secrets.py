"""FileSecretSource, EnvSecretSource, the prod refusal of env secrets, and the factory."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from docquery.config.envvars import env_var_for
from docquery.config.settings import Settings
from docquery.secrets import (
    EnvSecretRefusedError,
    EnvSecretSource,
    FallbackSecretSource,
    FileSecretSource,
    MissingSecretError,
    SecretFormatError,
    SecretSource,
    build_secret_source,
    refuse_env_secrets,
    secret_getter,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


# -- FileSecretSource ------------------------------------------------------------


def test_absent_file_is_none(tmp_path: Path) -> None:
    source = FileSecretSource(tmp_path)
    assert source.get_text("llm-api-key") is None
    assert source.get_json("api-keys.json") is None
    assert source.version("llm-api-key") is None
    assert isinstance(source, SecretSource)


def test_missing_directory_is_none(tmp_path: Path) -> None:
    assert FileSecretSource(tmp_path / "nope").get_text("llm-api-key") is None


def test_text_is_stripped_and_empty_is_none(tmp_path: Path) -> None:
    (tmp_path / "llm-api-key").write_text("  sk-abc\n")
    (tmp_path / "empty").write_text("\n")
    source = FileSecretSource(tmp_path)
    value = source.get_text("llm-api-key")
    assert value is not None
    assert value.get_secret_value() == "sk-abc"
    assert "sk-abc" not in repr(value)
    assert source.get_text("empty") is None


def test_change_seen_only_after_check_interval(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("one")
    source = FileSecretSource(tmp_path, check_interval_s=0.25, clock=clock)
    assert source.version("llm-api-key") == 1
    _replace(path, "two")
    clock.now = 0.1
    first = source.get_text("llm-api-key")
    assert first is not None
    assert first.get_secret_value() == "one"  # within the interval: no stat at all
    clock.now = 0.3
    second = source.get_text("llm-api-key")
    assert second is not None
    assert second.get_secret_value() == "two"
    assert source.version("llm-api-key") == 2


def test_rewrite_with_same_content_keeps_version(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("same")
    source = FileSecretSource(tmp_path, clock=clock)
    assert source.version("llm-api-key") == 1
    _replace(path, "same")
    clock.now = 1.0
    assert source.version("llm-api-key") == 1


def test_in_place_rewrite_detected(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("aaaa")
    source = FileSecretSource(tmp_path, clock=clock)
    assert source.version("llm-api-key") == 1
    path.write_text("bbbb")  # same inode, same size
    clock.now = 1.0
    value = source.get_text("llm-api-key")
    assert value is not None
    assert value.get_secret_value() == "bbbb"


def test_periodic_full_reread_catches_identical_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On filesystems with coarse timestamps a same-size write may leave the stat unchanged."""
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("aaaa")
    source = FileSecretSource(tmp_path, full_reread_s=5.0, clock=clock)
    source.get_text("llm-api-key")
    frozen = path.stat()
    path.write_text("bbbb")
    real_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda self, **kw: frozen if self == path else real_stat(self, **kw))
    clock.now = 1.0
    stale = source.get_text("llm-api-key")
    assert stale is not None
    assert stale.get_secret_value() == "aaaa"
    clock.now = 6.0
    fresh = source.get_text("llm-api-key")
    assert fresh is not None
    assert fresh.get_secret_value() == "bbbb"


def test_json_parsed_once_per_version(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "api-keys.json"
    path.write_text(json.dumps([{"id": "a"}]))
    source = FileSecretSource(tmp_path, clock=clock)
    first = source.get_json("api-keys.json")
    assert source.get_json("api-keys.json") is first
    _replace(path, json.dumps([{"id": "b"}]))
    clock.now = 1.0
    second = source.get_json("api-keys.json")
    assert second == [{"id": "b"}]
    assert second is not first


def test_malformed_json_error_has_no_content(tmp_path: Path) -> None:
    (tmp_path / "api-keys.json").write_text('[{"sha256": "topsecretvalue"')
    with pytest.raises(SecretFormatError) as err:
        FileSecretSource(tmp_path).get_json("api-keys.json")
    assert "topsecretvalue" not in str(err.value)
    assert err.value.__cause__ is None
    assert err.value.__suppress_context__


def test_file_removed_reads_as_absent(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("x")
    source = FileSecretSource(tmp_path, clock=clock)
    assert source.get_text("llm-api-key") is not None
    path.unlink()
    clock.now = 1.0
    assert source.get_text("llm-api-key") is None


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "", ".hidden", "x" * 200, "a..b"])
def test_names_cannot_escape_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        FileSecretSource(tmp_path).get_text(name)


def test_rotation_logs_names_never_values(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("value-one-SECRET")
    source = FileSecretSource(tmp_path, clock=clock)
    caplog.set_level(logging.DEBUG)
    source.get_text("llm-api-key")
    _replace(path, "value-two-SECRET")
    clock.now = 1.0
    source.get_text("llm-api-key")
    assert "llm-api-key" in caplog.text
    assert "SECRET" not in caplog.text


def test_concurrent_readers_during_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "llm-api-key"
    path.write_text("v0")
    source = FileSecretSource(tmp_path, check_interval_s=0.0)
    errors: list[BaseException] = []
    seen: set[str] = set()
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                value = source.get_text("llm-api-key")
                assert value is not None
                seen.add(value.get_secret_value())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(1, 200):
        _replace(path, f"v{i}")
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert seen <= {f"v{i}" for i in range(200)}
    value = source.get_text("llm-api-key")
    assert value is not None
    assert value.get_secret_value() == "v199"


def test_secret_getter_reads_current_value(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "llm-api-key"
    path.write_text("one")
    get = secret_getter(FileSecretSource(tmp_path, clock=clock), "llm-api-key")
    first = get()
    assert first is not None
    assert first.get_secret_value() == "one"
    _replace(path, "two")
    clock.now = 1.0
    second = get()
    assert second is not None
    assert second.get_secret_value() == "two"


# -- env vars: dev only ------------------------------------------------------------


def test_env_var_names() -> None:
    assert env_var_for("llm-api-key") == "DOCQUERY_LLM__API_KEY"
    assert env_var_for("qdrant-api-key") == "DOCQUERY_QDRANT__API_KEY"
    assert env_var_for("api-keys.json") == "DOCQUERY_SECRET__API_KEYS"


def test_env_source_in_dev_warns_without_value(caplog: pytest.LogCaptureFixture) -> None:
    source = EnvSecretSource(profile="dev", environ={"DOCQUERY_LLM__API_KEY": "sk-dev-SECRET"})
    with caplog.at_level(logging.WARNING):
        value = source.get_text("llm-api-key")
    assert value is not None
    assert value.get_secret_value() == "sk-dev-SECRET"
    assert "DOCQUERY_LLM__API_KEY" in caplog.text
    assert "sk-dev" not in caplog.text


def test_env_source_json(caplog: pytest.LogCaptureFixture) -> None:
    source = EnvSecretSource(profile="dev", environ={"DOCQUERY_SECRET__API_KEYS": "[]", "DOCQUERY_SECRET__JWKS": "{"})
    assert source.get_json("api-keys.json") == []
    with pytest.raises(SecretFormatError) as err:
        source.get_json("jwks.json")
    assert "DOCQUERY_SECRET__JWKS" in str(err.value)


def test_env_source_refused_in_prod_names_the_variable() -> None:
    with pytest.raises(EnvSecretRefusedError) as err:
        EnvSecretSource(profile="prod", environ={"DOCQUERY_LLM__API_KEY": "sk-prod-SECRET"})
    assert "DOCQUERY_LLM__API_KEY" in str(err.value)
    assert "sk-prod" not in str(err.value)
    assert err.value.variable == "DOCQUERY_LLM__API_KEY"


@pytest.mark.parametrize("var", ["DOCQUERY_LLM__API_KEY", "DOCQUERY_QDRANT__API_KEY", "DOCQUERY_SECRET__API_KEYS"])
def test_factory_refuses_env_secret_in_prod(tmp_path: Path, var: str) -> None:
    settings = Settings(profile="prod", secrets_dir=tmp_path)
    with pytest.raises(EnvSecretRefusedError) as err:
        build_secret_source(settings, environ={var: "some-value"})
    assert var in str(err.value)
    assert "some-value" not in str(err.value)


def test_refuse_env_secrets_ignores_non_secret_vars() -> None:
    refuse_env_secrets("prod", {"DOCQUERY_LLM__BASE_URL": "http://vllm:8000/v1", "DOCQUERY_PROFILE": "prod"})


def test_factory_prod_uses_files_only(tmp_path: Path) -> None:
    (tmp_path / "llm-api-key").write_text("from-file")
    source = build_secret_source(Settings(profile="prod", secrets_dir=tmp_path), environ={})
    assert isinstance(source, FileSecretSource)
    assert source.get_text("qdrant-api-key") is None


def test_factory_dev_falls_back_to_env_with_file_winning(tmp_path: Path) -> None:
    (tmp_path / "llm-api-key").write_text("from-file")
    env = {"DOCQUERY_LLM__API_KEY": "from-env", "DOCQUERY_QDRANT__API_KEY": "qdrant-from-env"}
    source = build_secret_source(Settings(profile="dev", secrets_dir=tmp_path), environ=env)
    assert isinstance(source, FallbackSecretSource)
    llm = source.get_text("llm-api-key")
    qdrant = source.get_text("qdrant-api-key")
    assert llm is not None
    assert qdrant is not None
    assert llm.get_secret_value() == "from-file"
    assert qdrant.get_secret_value() == "qdrant-from-env"
    assert source.get_text("embedder-api-key") is None


# -- prod: required secrets are checked where the source is built ---------------------

PROD_NEEDS = [
    ({"llm": {"base_url": "http://vllm:8000/v1"}}, "llm-api-key"),
    ({"qdrant": {"url": "https://qdrant:6333"}}, "qdrant-api-key"),
    ({"embedder": {"kind": "openai", "base_url": "http://tei:80/v1"}}, "embedder-api-key"),
]


@pytest.mark.parametrize("content", [None, "", "  \n", "changeme", "PLACEHOLDER", "Dummy"])
@pytest.mark.parametrize(("config", "name"), PROD_NEEDS)
def test_prod_refuses_a_missing_or_placeholder_required_secret(
    tmp_path: Path, config: dict[str, dict[str, str]], name: str, content: str | None
) -> None:
    if content is not None:
        (tmp_path / name).write_text(content)
    settings = Settings(profile="prod", secrets_dir=tmp_path, **config)
    with pytest.raises(MissingSecretError) as err:
        build_secret_source(settings, environ={})
    assert name in str(err.value)
    assert str(tmp_path / name) in str(err.value)
    if content and content.strip():
        assert content.strip() not in str(err.value)


@pytest.mark.parametrize(("config", "name"), PROD_NEEDS)
def test_prod_starts_with_the_required_secret_in_its_file(
    tmp_path: Path, config: dict[str, dict[str, str]], name: str
) -> None:
    (tmp_path / name).write_text("a-real-key\n")
    source = build_secret_source(Settings(profile="prod", secrets_dir=tmp_path, **config), environ={})
    value = source.get_text(name)
    assert value is not None
    assert value.get_secret_value() == "a-real-key"


def test_dev_does_not_require_secrets(tmp_path: Path) -> None:
    settings = Settings(secrets_dir=tmp_path, qdrant={"url": "http://qdrant:6333"}, llm={"base_url": "http://x/v1"})
    assert build_secret_source(settings, environ={}).get_text("qdrant-api-key") is None
