"""Where the query path runs each retrieval step, and the engine fact that decides it.

``RagPipeline.search`` has one path: ``await embedder.aembed`` then ``await index.search``.
Behind those awaits, a remote embedder is a network wait on the loop; the local model
computes on one worker thread (one hand-off); a Qdrant server query is awaited through
qdrant-client's async client, with no thread; an embedded Edge query runs on the loop
thread, because the engine holds the GIL for the whole query (a worker thread would not
free the loop, only add two hand-offs). Every path returns the same ACL-filtered hits.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from qdrant_client import AsyncQdrantClient, QdrantClient

from docquery.core.domain import Principal
from docquery.core.ports import IndexAdapter
from docquery.embedders.remote import OpenAIEmbedder
from docquery.index import QdrantIndex, open_edge, open_server
from docquery.rag.pipeline import RagPipeline, RetrievalConfig, Trace
from docquery.rag.sanitize import Sanitizer
from tests.support.chunks import make_chunk
from tests.support.fakes import HashEmbedder
from tests.support.fixtures import standin_fixture
from tests.support.standins.openai_server import DEFAULT_KEY, StandInOpenAIServer

DIM = 64


class RecordingShard:
    """Delegates to the real Edge shard and records the thread each engine query ran on."""

    def __init__(self, inner: Any, threads: list[int]) -> None:
        self._inner = inner
        self._threads = threads

    def query_batch(self, *args: Any) -> Any:
        self._threads.append(threading.get_ident())
        return self._inner.query_batch(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingEmbedder(HashEmbedder):
    """The local-embedder path: a blocking ``embed`` behind the one ``aembed`` hand-off."""

    def __init__(self) -> None:
        super().__init__(DIM, model_id="standin-embed")
        self.threads: list[int] = []

    def embed(self, texts: Any, *, query: bool = False) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return super().embed(texts, query=query)


standin = standin_fixture(embedding_dim=DIM)


def _fill(index: IndexAdapter) -> None:
    emb = HashEmbedder(DIM, model_id="standin-embed")  # the stand-in's /v1/embeddings gives the same vectors
    index.upsert(
        [
            make_chunk(emb, "vpn", "Connect to the VPN with your hardware token", ("eng",)),
            make_chunk(emb, "payroll", "Payroll runs on the last business day", ("hr",)),
            make_chunk(emb, "vpn-faq", "The VPN token expires after a year", ("eng",), index=1),
        ]
    )


def _search(pipeline: RagPipeline) -> tuple[list[str], int, Trace]:
    async def run() -> tuple[list[str], int, Trace]:
        trace = Trace()
        principal = Principal(id="p", groups=frozenset({"eng"}), roles=frozenset({"query"}))
        try:
            hits = await pipeline.search("VPN token", principal, 5, trace=trace)
        finally:
            await pipeline.embedder.aclose()
        return [h.chunk.doc_id for h in hits], threading.get_ident(), trace

    return asyncio.run(run())


def _pipeline(embedder: Any, index: Any) -> RagPipeline:
    return RagPipeline(
        embedder=embedder,
        index=index,
        generator=None,  # type: ignore[arg-type]  # search only
        sanitizer=Sanitizer(),
        retrieval=RetrievalConfig(mode="hybrid", min_dense_score=-1.0),
    )


def test_each_path_runs_where_intended_and_finds_the_same_hits(
    tmp_path: Path, standin: StandInOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    edge_threads: list[int] = []
    edge: QdrantIndex = open_edge(tmp_path / "edge", name="c", model_id="standin-embed", dimension=DIM)
    edge._engine._shard = RecordingShard(edge._engine._shard, edge_threads)  # type: ignore[attr-defined]

    client = QdrantClient(location=":memory:")
    server = open_server(url=":memory:", name="c", model_id="standin-embed", dimension=DIM, client=client)

    def blocking_query(*args: object, **kwargs: object) -> None:
        raise AssertionError("the query path used the blocking client")

    server_threads: list[int] = []
    async_query = AsyncQdrantClient.query_batch_points

    async def recording_query(self: AsyncQdrantClient, *args: Any, **kwargs: Any) -> Any:
        server_threads.append(threading.get_ident())
        return await async_query(self, *args, **kwargs)

    monkeypatch.setattr(client, "query_batch_points", blocking_query)
    monkeypatch.setattr(AsyncQdrantClient, "query_batch_points", recording_query)
    remote = OpenAIEmbedder(
        base_url=standin.base_url, model="standin-embed", api_key=lambda: SecretStr(DEFAULT_KEY), dimension=DIM
    )
    local = RecordingEmbedder()
    try:
        for index in (edge, server):
            _fill(index)

        # Remote embedder + Edge: the embedding is awaited and the engine called on the loop thread.
        ids, loop_thread, trace = _search(_pipeline(remote, edge))
        assert edge_threads == [loop_thread]
        assert trace.embed_s > 0 and trace.search_s > 0
        expected = ids

        # Remote embedder + server: the query is awaited through the async client, on the loop thread.
        ids, loop_thread, _ = _search(_pipeline(remote, server))
        assert server_threads == [loop_thread]
        assert ids == expected

        # Local embedder + Edge: one hand-off for the model; the engine still runs on the loop thread.
        ids, loop_thread, _ = _search(_pipeline(local, edge))
        assert len(local.threads) == 1 and local.threads[0] != loop_thread
        assert edge_threads[-1] == loop_thread
        assert ids == expected

        # Local embedder + server: the same hand-off, then the async client.
        ids, loop_thread, _ = _search(_pipeline(local, server))
        assert local.threads[-1] != loop_thread and server_threads[-1] == loop_thread
        assert ids == expected
        assert set(expected) == {"vpn", "vpn-faq"}  # the hr document stays out on every path
    finally:
        remote.close()
        edge.close()
        server.close()
        client.close()
