"""An unchanged re-ingest opens the index and checks the collection without loading the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docquery import wiring
from docquery.config.settings import Settings
from docquery.core.ports import Embedder
from docquery.embedders.lazy import LazyEmbedder, local_model_spec
from docquery.wiring import build_index
from ingest.discover.acl import ACL_FILE
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.ingest_fixtures import ModelStandIn, scifact_docs, write

_PROBE = """
import json, sys
from docquery.cli import main
rc = main(["ingest", sys.argv[1], "--json"])
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
open(sys.argv[2], "w").write(json.dumps({"rc": rc, "heavy": heavy}))
"""


def _corpus(tmp_path: Path, n: int = 6) -> tuple[Path, Settings]:
    root = tmp_path / "corpus"
    write(root / ACL_FILE, "groups: [staff]\n")
    for doc_id, text in scifact_docs(n):
        write(root / f"doc-{doc_id}.txt", text)
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "no-secrets")
    stand_in = ModelStandIn()  # the bundled model's id, dimension and tokenizer; hash vectors
    index = build_index(settings, stand_in)
    try:
        assert run_ingest(settings, IngestOptions(paths=(root,)), embedder=stand_in, index=index).added == n
    finally:
        index.close()
    return root, settings


def test_the_declared_spec_is_the_models() -> None:
    stand_in = ModelStandIn()
    assert local_model_spec() == (stand_in.model_id, stand_in.dimension)


def test_unchanged_rerun_does_not_import_torch(tmp_path: Path) -> None:
    root, _ = _corpus(tmp_path)
    out = tmp_path / "probe.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(
        DOCQUERY_DATA_DIR=str(tmp_path / "data"),
        DOCQUERY_SECRETS_DIR=str(tmp_path / "no-secrets"),
        DOCQUERY_EMBEDDER__TUNE_MALLOC="false",
        HF_HUB_OFFLINE="1",
    )
    got = subprocess.run(
        [sys.executable, "-c", _PROBE, str(root), str(out)], env=env, capture_output=True, text=True, timeout=120
    )
    probe = json.loads(out.read_text())
    assert probe == {"rc": 0, "heavy": []}, got.stderr
    report = json.loads(got.stdout)
    assert report["unchanged"] == 6 and report["added"] == report["updated"] == report["chunks_written"] == 0


def test_the_model_is_built_only_when_something_needs_embedding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, settings = _corpus(tmp_path)
    built: list[Embedder] = []

    def counting(s: Settings, keys: object) -> Embedder:
        built.append(ModelStandIn())
        return built[-1]

    monkeypatch.setitem(wiring.EMBEDDERS, "local", counting)
    report = run_ingest(settings, IngestOptions(paths=(root,)))
    assert (report.unchanged, report.added, built) == (6, 0, [])

    changed = next(p for p in sorted(root.glob("doc-*.txt")))
    changed.write_text(changed.read_text() + "\n\nAn erratum.")
    report = run_ingest(settings, IngestOptions(paths=(root,)))
    assert (report.unchanged, report.updated, len(built)) == (5, 1, 1)
    assert report.chunks_written > 0


def test_lazy_embedder_loads_once_and_refuses_a_model_that_disagrees() -> None:
    calls: list[int] = []

    def factory() -> Embedder:
        calls.append(1)
        return ModelStandIn()

    stand_in = ModelStandIn()
    lazy = LazyEmbedder(stand_in.model_id, stand_in.dimension, factory)
    assert not lazy.loaded and lazy.embed([]) == [] and calls == []
    assert lazy.embed(["a", "b"]) == stand_in.embed(["a", "b"])
    lazy.embed(["c"])
    assert lazy.tokenizer is not None and calls == [1]

    wrong = LazyEmbedder(stand_in.model_id, stand_in.dimension + 1, ModelStandIn)
    with pytest.raises(Exception, match="differs"):
        wrong.embed(["a"])
