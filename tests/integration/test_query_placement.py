"""Where the query path runs each retrieval step, and the engine fact that decides it.

``RagPipeline.search`` awaits a remote embedder on the event loop, then calls an
index that holds the GIL (embedded Edge) directly and sends one that waits on the
network (Qdrant server) to a worker thread. A local embedder computes on the CPU,
so embedding and search go to one worker thread together. Every path must return
the same ACL-filtered hits.

The first test keeps ``EdgeIndex.search_releases_gil = False`` honest: if a later
qdrant-edge released the GIL during a query, it fails, and the Edge search should
go back to a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from qdrant_client import QdrantClient
from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeVectorParams,
    Point,
    Query,
    QueryBatchRequest,
    QueryRequest,
    UpdateOperation,
)

from docquery.adapters.edge_index import EdgeIndex
from docquery.adapters.openai_embedder import OpenAIEmbedder
from docquery.adapters.qdrant_server import ServerIndex
from docquery.domain import Principal
from docquery.ports import IndexAdapter
from docquery.rag.pipeline import RagPipeline, RetrievalConfig, Trace
from docquery.rag.sanitize import Sanitizer
from tests.integration.test_index_contract import make_chunk
from tests.support.fakes import HashEmbedder
from tests.support.standins.openai_server import DEFAULT_KEY, StandInOpenAIServer

DIM = 64


def test_edge_holds_the_gil_for_a_whole_query(tmp_path: Path) -> None:
    dim, points = 256, 3000
    shard = EdgeShard.create(
        str(tmp_path / "shard"), EdgeConfig(vectors={"d": EdgeVectorParams(size=dim, distance=Distance.Cosine)})
    )
    values = [((i * 2654435761) % 1000) / 1000.0 for i in range(dim * 2)]  # fixed, varied vectors
    shard.update(
        UpdateOperation.upsert_points(
            [
                Point(id=uuid.UUID(int=i + 1), vector={"d": values[i % dim : i % dim + dim]}, payload={})
                for i in range(points)
            ]
        )
    )
    requests = [QueryRequest(limit=10, query=Query.Nearest(values[j : j + dim], using="d")) for j in range(dim)]
    # One engine call long enough (>= 50 ms) that a 5 ms switch interval is a small part of it.
    alone = 0.0
    while alone < 0.05:
        batch = QueryBatchRequest(requests)
        started = time.perf_counter()
        shard.query_batch(batch)
        alone = time.perf_counter() - started
        requests = requests * 2

    count = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal count
        while not stop.is_set():
            count += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.05)
        before, t0 = count, time.perf_counter()
        time.sleep(0.05)  # the spinner's rate while this thread waits without the GIL
        rate = (count - before) / (time.perf_counter() - t0)
        before, t0 = count, time.perf_counter()
        shard.query_batch(batch)
        during = count - before
        took = time.perf_counter() - t0
    finally:
        stop.set()
        spinner.join()
        shard.close()
    # Holding the GIL, the spinner gets at most one switch interval (5 ms) of the call; released,
    # it would run through most of it on the other core.
    assert during < 0.25 * rate * took, f"spinner ran {during / (rate * took):.0%} of the query: the GIL was released"


class RecordingIndex:
    """Delegates to a real index and records the thread each search ran on."""

    def __init__(self, inner: IndexAdapter) -> None:
        self._inner = inner
        self.search_releases_gil = inner.search_releases_gil
        self.threads: list[int] = []

    def search(self, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return self._inner.search(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingEmbedder(HashEmbedder):
    """The local-embedder path: a blocking ``embed`` and no ``aembed``."""

    def __init__(self) -> None:
        super().__init__(DIM, model_id="standin-embed")
        self.threads: list[int] = []

    def embed(self, texts: Any, *, query: bool = False) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return super().embed(texts, query=query)


@pytest.fixture
def standin() -> Iterator[StandInOpenAIServer]:
    with StandInOpenAIServer() as server:
        server.config.embedding_dim = DIM
        yield server


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
            aclose = getattr(pipeline.embedder, "aclose", None)
            if aclose is not None:
                await aclose()
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


def test_each_path_runs_where_intended_and_finds_the_same_hits(tmp_path: Path, standin: StandInOpenAIServer) -> None:
    edge = RecordingIndex(EdgeIndex(tmp_path / "edge", name="c", model_id="standin-embed", dimension=DIM))
    client = QdrantClient(location=":memory:")
    server = RecordingIndex(
        ServerIndex(url=":memory:", name="c", model_id="standin-embed", dimension=DIM, client=client)
    )
    remote = OpenAIEmbedder(
        base_url=standin.base_url, model="standin-embed", api_key=lambda: SecretStr(DEFAULT_KEY), dimension=DIM
    )
    local = RecordingEmbedder()
    try:
        for index in (edge, server):
            _fill(index)

        # Remote embedder + Edge: the embedding is awaited and the search called on the loop thread.
        ids, loop_thread, trace = _search(_pipeline(remote, edge))
        assert edge.threads[-1] == loop_thread
        assert trace.embed_s > 0 and trace.search_s > 0
        expected = ids

        # Remote embedder + server: the search waits on a worker thread.
        ids, loop_thread, _ = _search(_pipeline(remote, server))
        assert server.threads[-1] != loop_thread
        assert ids == expected

        # Local embedder + Edge: both steps on one worker thread.
        ids, loop_thread, _ = _search(_pipeline(local, edge))
        assert local.threads[-1] == edge.threads[-1] != loop_thread
        assert ids == expected
        assert set(expected) == {"vpn", "vpn-faq"}  # the hr document stays out on every path
    finally:
        remote.close()
        edge.close()
        server.close()
        client.close()
