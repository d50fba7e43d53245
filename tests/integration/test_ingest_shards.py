"""Sharded runs (as a Kubernetes Indexed Job would make them) build exactly the index of one run."""

from __future__ import annotations

from pathlib import Path

from docquery.config.settings import Settings
from docquery.wiring import build_index
from ingest.discover.walk import Shard
from tests.support.ingest_fixtures import CountingEmbedder, IngestEnv, index_state, ingest_env, write

__all__ = ["ingest_env"]


def test_union_of_shards_equals_a_single_run(ingest_env: IngestEnv, tmp_path: Path) -> None:
    env = ingest_env
    for i in range(40):
        write(env.docs / f"team{i % 3}" / f"note-{i:02}.md", f"# Note {i}\n\nBody of note number {i}.\n")
    n = 3
    reports = [env.run(shard=Shard(i, n)) for i in range(n)]
    assert all(r.added > 0 for r in reports), "every shard got files"
    assert sum(r.added for r in reports) == 40
    sharded = env.state()

    single_settings = Settings(data_dir=tmp_path / "single", secrets_dir=tmp_path / "secrets")
    single_index = build_index(single_settings, CountingEmbedder())
    try:
        single = IngestEnv(single_settings, CountingEmbedder(), single_index, env.docs)
        assert single.run().added == 40
        assert index_state(single_index) == sharded
    finally:
        single_index.close()

    # --delete-missing in a shard removes only that shard's missing documents.
    gone = sorted(env.docs.rglob("*.md"))[:6]
    for path in gone:
        path.unlink()
    deleted = [env.run(shard=Shard(i, n), delete_missing=True).deleted for i in range(n)]
    assert sum(deleted) == 6 and sum(1 for d in deleted if d) >= 2
    assert sorted(env.state()) == sorted(p.name for p in env.docs.rglob("*.md"))
