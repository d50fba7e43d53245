"""Crash safety: kill -9 a real ``docquery ingest`` mid-run, re-run, and compare with a clean run.

The killed process is the real CLI with the real bundled model (no test hooks in
production code): its plain progress lines (non-TTY) tell the test when chunks
have been written. The in-process runs (the initial one, the re-run and the
clean comparison) use a stand-in that declares the model's id, dimension and
tokenizer but embeds with hashes: only the index structure is compared (point
ids, records, counts, orphans), and neither chunking nor point ids depend on the
vectors. That keeps the test to one model load (in the subprocess).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.core.ports import Embedder
from docquery.wiring import build_index
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.ingest_fixtures import ModelStandIn, index_state, scifact_docs, write

pytestmark = pytest.mark.slow
_WRITTEN = re.compile(r"chunks written (\d+)")
State = dict[str, tuple[str, str, int, tuple[str, ...], tuple[str, ...]]]


def _corpus(root: Path, docs: list[tuple[str, str]]) -> None:
    write(root / ACL_FILE, "groups: [research]\n")
    for doc_id, text in docs:
        write(root / f"{doc_id[-1]}" / f"doc-{doc_id}.txt", text)


def _ingest(data: Path, root: Path, embedder: Embedder) -> State:
    settings = Settings(data_dir=data, secrets_dir=data / "no-secrets")
    index = build_index(settings, embedder)
    try:
        report = run_ingest(settings, IngestOptions(paths=(root,), delete_missing=True), embedder=embedder, index=index)
        assert report.failed == [] and report.error is None
        return index_state(index)
    finally:
        index.close()


def _state(data: Path, embedder: Embedder) -> State:
    index = build_index(Settings(data_dir=data, secrets_dir=data / "no-secrets"), embedder)
    try:
        return index_state(index)
    finally:
        index.close()


def test_killed_run_converges_to_the_clean_state(tmp_path: Path) -> None:
    stand_in = ModelStandIn()
    root, data = tmp_path / "corpus", tmp_path / "data"
    docs = scifact_docs(150)
    _corpus(root, docs[:60])
    _ingest(data, root, stand_in)

    # v2: 15 changed, 10 deleted, 90 new documents.
    for doc_id, text in docs[:15]:
        write(root / f"{doc_id[-1]}" / f"doc-{doc_id}.txt", text + "\n\nRevised with an erratum.")
    for doc_id, _ in docs[15:25]:
        (root / f"{doc_id[-1]}" / f"doc-{doc_id}.txt").unlink()
    _corpus(root, docs[60:])

    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(
        DOCQUERY_DATA_DIR=str(data),
        DOCQUERY_SECRETS_DIR=str(tmp_path / "no-secrets"),
        DOCQUERY_INGEST__PROGRESS_INTERVAL_S="0",
        DOCQUERY_INGEST__EMBED_BATCH="16",
        HF_HUB_OFFLINE="1",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "docquery.cli", "ingest", str(root), "--delete-missing"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    written = 0
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            m = _WRITTEN.search(line)
            if m and int(m.group(1)) > 0:
                written = int(m.group(1))
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
        proc.kill()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert written > 0

    clean_root = tmp_path / "clean-data"
    clean = _ingest(clean_root, root, stand_in)
    killed = _state(data, stand_in)
    assert killed != clean, "the kill left the index part-way (otherwise this test proves nothing)"

    rerun = _ingest(data, root, stand_in)
    assert rerun == clean
    assert all(status == "indexed" and len(ids) == count for status, _, count, _, ids in rerun.values())
    assert len(rerun) == 140
