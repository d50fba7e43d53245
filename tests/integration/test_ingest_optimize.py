"""What ``docquery ingest`` does to the index at the end of a run, on the real embedded engine.

The run calls optimize() when it wrote chunks, and the collection's thresholds decide what that
costs: a run that leaves less than ``indexing_threshold_kb`` of unindexed vectors rebuilds nothing.
A run that writes more than ``max_segment_size_kb`` seals each full segment as it goes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.index import IndexTuning, QdrantIndex, open_edge
from docquery.wiring import build_index
from ingest.pipeline import IngestOptions, run_ingest
from tests.support.ingest_fixtures import CountingEmbedder, write

DIM = 64  # CountingEmbedder: 256 bytes a vector, so 4 KB is 16 chunks


@pytest.fixture
def small_threshold(tmp_path: Path) -> Iterator[tuple[Settings, CountingEmbedder, QdrantIndex, Path]]:
    settings = Settings(
        data_dir=tmp_path / "data",
        secrets_dir=tmp_path / "secrets",
        qdrant={"indexing_threshold_kb": 4},
        ingest={"chunk_tokens": 16, "chunk_overlap": 0},
    )
    embedder = CountingEmbedder()
    index = build_index(settings, embedder)
    assert isinstance(index, QdrantIndex)
    docs = tmp_path / "docs"
    docs.mkdir()
    yield settings, embedder, index, docs
    index.close()


def _doc(n: int) -> str:
    return " ".join(f"word{n}x{k} alpha beta gamma" for k in range(40)) + "\n"


def _optimize_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("index optimize:")]


def test_a_bulk_run_builds_the_index_and_a_small_one_rebuilds_nothing(
    small_threshold: tuple[Settings, CountingEmbedder, QdrantIndex, Path], caplog: pytest.LogCaptureFixture
) -> None:
    settings, embedder, index, docs = small_threshold
    caplog.set_level(logging.INFO, logger="ingest")
    for n in range(10):
        write(docs / f"d{n}.txt", _doc(n))
    first = run_ingest(settings, IngestOptions(paths=(docs,), groups=("staff",)), embedder=embedder, index=index)
    assert first.chunks_written * DIM * 4 > 4 * 1024  # past the threshold
    assert _optimize_lines(caplog)[-1].startswith("index optimize: rebuilt segments")
    built = index.stats()
    assert built.indexed_vectors >= 2 * first.chunks_written  # dense in HNSW, plus the sparse ones

    caplog.clear()
    write(docs / "late.txt", "one short late note\n")
    second = run_ingest(settings, IngestOptions(paths=(docs,), groups=("staff",)), embedder=embedder, index=index)
    assert (second.added, second.unchanged, second.chunks_written) == (1, 10, 1)
    assert _optimize_lines(caplog)[-1].startswith("index optimize: nothing to do")
    after = index.stats()
    # The new chunk waits in the small appendable segment (searched exactly); no segment was rebuilt.
    assert after.segments == built.segments
    assert after.indexed_vectors == built.indexed_vectors + 1  # its sparse vector only


def test_no_optimize_when_the_run_wrote_no_chunks(
    small_threshold: tuple[Settings, CountingEmbedder, QdrantIndex, Path], caplog: pytest.LogCaptureFixture
) -> None:
    settings, embedder, index, docs = small_threshold
    write(docs / "a.txt", _doc(1))
    run_ingest(settings, IngestOptions(paths=(docs,), groups=("staff",)), embedder=embedder, index=index)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="ingest")
    again = run_ingest(settings, IngestOptions(paths=(docs,), groups=("staff",)), embedder=embedder, index=index)
    assert (again.unchanged, again.chunks_written) == (1, 0)
    assert _optimize_lines(caplog) == []


def test_a_long_run_seals_full_segments_as_it_writes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A run that writes more than a segment's worth seals each full one on the way, and logs it without content."""
    settings = Settings(
        data_dir=tmp_path / "data",
        secrets_dir=tmp_path / "secrets",
        ingest={"chunk_tokens": 16, "chunk_overlap": 0},
    )
    embedder = CountingEmbedder()
    # 8 KB of 64 floats is a segment of 32 chunks.
    tuning = IndexTuning(max_segment_size_kb=8, indexing_threshold_kb=1)
    index = open_edge(
        tmp_path / "shard", name="c", model_id=embedder.model_id, dimension=embedder.dimension, tuning=tuning
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(10):
        write(docs / f"d{n}.txt", _doc(n))
    caplog.set_level(logging.INFO)
    try:
        report = run_ingest(settings, IngestOptions(paths=(docs,), groups=("staff",)), embedder=embedder, index=index)
        stats = index.stats()
        assert report.chunks_written > 3 * 32
        sealed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("index: segment sealed in")]
        assert len(sealed) == report.chunks_written // 32
        assert stats.seal_s > 0
        assert stats.segments >= len(sealed) + 1
        assert index.count_chunks() == report.chunks_written
        seal_logs = [r for r in caplog.records if r.name == "docquery.index.edge"]
        assert seal_logs
        assert not any("alpha" in r.getMessage() or "word" in r.getMessage() for r in seal_logs)
    finally:
        index.close()
