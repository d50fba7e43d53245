"""docquery.runtime.malloc: glibc settings for bulk embedding.

mallopt changes the whole process for good, so the real effect is measured in child processes;
this process never calls it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ingest.cli
from docquery.config.settings import Settings
from docquery.runtime import malloc

# Two threads, like the embed workers, each allocating, touching and freeing 8 MiB buffers the
# way torch handles a pass's intermediate tensors. Prints the page faults the loop took.
CHILD = """
import ctypes, json, resource, sys, threading
from docquery.runtime.malloc import tune_for_bulk_embedding
applied = tune_for_bulk_embedding() if sys.argv[1] == "tuned" else None
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
SIZE = 8 * 1024 * 1024
def passes():
    for _ in range(40):
        blocks = [libc.malloc(SIZE) for _ in range(3)]
        for b in blocks:
            ctypes.memset(b, 1, SIZE)
        for b in blocks:
            libc.free(b)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
threads = [threading.Thread(target=passes) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"applied": applied, "faults": faults}))
"""

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="the settings are glibc's"
)


def _child(mode: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60, check=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@glibc_only
def test_tuned_threads_reuse_freed_memory_instead_of_faulting_it_in_again() -> None:
    pages_touched = 2 * 40 * 3 * (8 * 1024 * 1024 // 4096)  # every page of every buffer, once each
    default, tuned = _child("default"), _child("tuned")
    assert tuned["applied"] is True
    # glibc's defaults give each buffer fresh pages: about one fault per page touched.
    assert default["faults"] > pages_touched // 2
    # Tuned, the buffers are reused: the first pass faults its pages in, later passes do not.
    assert tuned["faults"] < pages_touched // 10


def test_does_nothing_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(*_: object, **__: object) -> None:
        raise AssertionError("mallopt must not be looked up off glibc")

    monkeypatch.setattr(platform, "libc_ver", lambda: ("musl", "1.2"))
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert malloc.tune_for_bulk_embedding() is False


@pytest.mark.parametrize("enabled", [True, False])
def test_ingest_command_tunes_before_running_unless_switched_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, enabled: bool
) -> None:
    calls: list[str] = []

    def tune() -> bool:
        calls.append("tune")
        return True

    def run(*_: object) -> int:
        calls.append("run")
        return 0

    monkeypatch.setattr(ingest.cli, "tune_for_bulk_embedding", tune)
    monkeypatch.setattr(ingest.cli, "run", run)
    monkeypatch.setenv("DOCQUERY_EMBEDDER__TUNE_MALLOC", str(enabled).lower())
    settings = Settings(data_dir=tmp_path, secrets_dir=tmp_path / "none")
    assert ingest.cli._run(argparse.Namespace(), settings) == 0
    assert calls == (["tune", "run"] if enabled else ["run"])


@pytest.mark.parametrize("enabled", [True, False])
def test_eval_command_tunes_before_building_the_embedder_unless_switched_off(
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
    assert calls == (["tune", "embedder"] if enabled else ["embedder"])
