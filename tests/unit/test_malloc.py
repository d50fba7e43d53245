"""docquery.runtime.malloc: glibc settings for bulk embedding.

mallopt changes the whole process for good: this process never calls it. What glibc then does with
the settings is glibc's behaviour, not DocQuery's: docs/ingestion.md gives what it measured.
"""

from __future__ import annotations

import argparse
import ctypes
import platform
from pathlib import Path

import pytest

import ingest.cli
from docquery.config.settings import Settings
from docquery.runtime import kernel_caches, malloc


def test_does_nothing_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(*_: object, **__: object) -> None:
        raise AssertionError("mallopt must not be looked up off glibc")

    monkeypatch.setattr(platform, "libc_ver", lambda: ("musl", "1.2"))
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert malloc.tune_for_bulk_embedding() is False


def _recorded(calls: list[str], name: str) -> dict[str, str]:
    calls.append(name)
    return {}


@pytest.mark.parametrize("enabled", [True, False])
def test_ingest_command_bounds_the_caches_and_tunes_before_running_unless_switched_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, enabled: bool
) -> None:
    calls: list[str] = []

    def tune() -> bool:
        calls.append("tune")
        return True

    def run(*_: object) -> int:
        calls.append("run")
        return 0

    monkeypatch.setattr(ingest.cli, "bound_kernel_caches", lambda: _recorded(calls, "bound"))
    monkeypatch.setattr(ingest.cli, "tune_for_bulk_embedding", tune)
    monkeypatch.setattr(ingest.cli, "run", run)
    monkeypatch.setenv("DOCQUERY_EMBEDDER__TUNE_MALLOC", str(enabled).lower())
    settings = Settings(data_dir=tmp_path, secrets_dir=tmp_path / "none")
    assert ingest.cli._run(argparse.Namespace(), settings) == 0
    assert calls == (["bound", "tune", "run"] if enabled else ["bound", "run"])


@pytest.mark.parametrize("enabled", [True, False])
def test_eval_command_bounds_the_caches_and_tunes_before_building_the_embedder_unless_switched_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, enabled: bool
) -> None:
    import docquery.wiring
    from docquery.commands.eval import cmd_eval_retrieval

    calls: list[str] = []

    class Built(Exception):
        pass

    def tune() -> bool:
        calls.append("tune")
        return True

    def build_embedder(_: Settings) -> None:
        calls.append("embedder")
        raise Built  # far enough: the order is what this test checks

    monkeypatch.setattr(kernel_caches, "bound_kernel_caches", lambda: _recorded(calls, "bound"))
    monkeypatch.setattr(malloc, "tune_for_bulk_embedding", tune)
    monkeypatch.setattr(docquery.wiring, "build_embedder", build_embedder)
    monkeypatch.setenv("DOCQUERY_EMBEDDER__TUNE_MALLOC", str(enabled).lower())
    settings = Settings(data_dir=tmp_path, secrets_dir=tmp_path / "none")
    dataset = tmp_path / "ds"  # the layout is checked before anything else, so it has to be there
    (dataset / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (dataset / name).write_text("")
    args = argparse.Namespace(dataset_dir=dataset, split="test", whole_documents=False)
    with pytest.raises(Built):
        cmd_eval_retrieval(args, settings)
    assert calls == (["bound", "tune", "embedder"] if enabled else ["bound", "embedder"])


class _Fn:
    def __init__(self, calls: list[tuple[str, tuple[int, ...]]], name: str, result: int) -> None:
        self.calls, self.name, self.result = calls, name, result
        self.argtypes: object = None
        self.restype: object = None

    def __call__(self, *args: int) -> int:
        self.calls.append((self.name, args))
        return self.result


class _FakeLibc:
    """Records the calls a tuned process makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...]]] = []
        self.mallopt = _Fn(self.calls, "mallopt", 1)
        self.malloc_trim = _Fn(self.calls, "malloc_trim", 1)


@pytest.fixture
def fake_glibc(monkeypatch: pytest.MonkeyPatch) -> _FakeLibc:
    libc = _FakeLibc()
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(malloc, "_tuned", [])  # this process's own state is never touched
    return libc


def test_an_untuned_process_gives_nothing_back(fake_glibc: _FakeLibc) -> None:
    assert malloc.give_back_kept_memory() is False
    assert fake_glibc.calls == []


def test_a_tuned_process_gives_its_kept_memory_back_on_each_call(fake_glibc: _FakeLibc) -> None:
    assert malloc.tune_for_bulk_embedding() is True
    assert [name for name, _ in fake_glibc.calls] == ["mallopt"] * len(malloc.SETTINGS)
    fake_glibc.calls.clear()
    assert malloc.give_back_kept_memory() is True
    assert malloc.give_back_kept_memory() is True
    assert fake_glibc.calls == [("malloc_trim", (0,)), ("malloc_trim", (0,))]


def test_a_partly_refused_tuning_still_gives_back(fake_glibc: _FakeLibc) -> None:
    fake_glibc.mallopt.result = 0  # glibc refused: whatever took effect still keeps memory
    assert malloc.tune_for_bulk_embedding() is False
    assert malloc.give_back_kept_memory() is True
    assert fake_glibc.calls[-1] == ("malloc_trim", (0,))
