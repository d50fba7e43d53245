"""The embedded engine's hybrid query: the ACL filter once per branch gives what the earlier form gave,
and concurrent searches on one index return what the same searches return one at a time."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from qdrant_edge import Prefetch, QueryRequest

from docquery.core.collection import PUBLIC_GROUP
from docquery.core.domain import AclFilter
from docquery.index import FusionParams, QdrantIndex, open_edge
from docquery.index import edge as edge_engine
from docquery.index.engine import Search
from docquery.index.payload import sort_hits_key
from tests.support.chunks import make_chunk
from tests.support.fakes import HashEmbedder

VOCAB = [f"w{i:03d}" for i in range(150)]
GROUPS = ("a", "b", "c", PUBLIC_GROUP)
CALLERS = ({"a"}, {"a", "b", "c"}, {"b"})


def corpus(embedder: HashEmbedder, n: int = 300) -> list[Any]:
    rng = random.Random(5)  # noqa: S311 - deterministic test data
    weights = [1.0 / (r + 1) for r in range(len(VOCAB))]
    texts = [" ".join(rng.choices(VOCAB, weights=weights, k=8 + i % 40)) for i in range(n)]
    return [make_chunk(embedder, f"doc{i:03d}", t, (GROUPS[i % 4],)) for i, t in enumerate(texts)]


def questions(n: int) -> list[str]:
    rng = random.Random(9)  # noqa: S311
    return [" ".join(rng.sample(VOCAB[:80], k=rng.randint(2, 5))) for _ in range(n)]


@pytest.fixture(params=["rrf", "dbsf"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QdrantIndex]:
    embedder = HashEmbedder(dimension=128)
    fusion = FusionParams(method=request.param, prefetch_limit=30)
    idx = open_edge(tmp_path / "edge", name="c", model_id=embedder.model_id, dimension=128, fusion=fusion)
    idx.upsert(corpus(embedder))
    yield idx
    idx.close()


def previous_form(s: Search, engine: Any) -> QueryRequest:
    """The fused request as it was built before: the ACL filter on the query and on each prefetch."""
    flt = edge_engine._filter(s.where)
    assert s.fusion is not None
    prefetches = [
        Prefetch(
            limit=s.prefetch_limit,
            query=edge_engine._nearest(n),
            filter=flt,
            params=edge_engine._params(n, s, engine._tuning),
        )
        for n in s.prefetch
    ]
    return QueryRequest(
        limit=s.limit,
        prefetches=prefetches,
        query=edge_engine._fusion(s.fusion),
        filter=flt,
        with_payload=True,
        with_vector=[s.prefetch[0].using] if s.with_dense else False,
    )


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]], limit: int, ctx: Any) -> None:
    """Same scores rank by rank, same ids, except among the points tied with the last one when the
    list was cut at ``limit``: which of them makes the cut is the engine's choice, run to run too."""
    assert [s for _, s in got] == [s for _, s in want], ctx
    if len(got) == limit:
        last = got[-1][1]
        got, want = [h for h in got if h[1] != last], [h for h in want if h[1] != last]
    assert got == want, ctx


def test_fused_query_returns_what_the_previous_form_returned(index: QdrantIndex) -> None:
    embedder = HashEmbedder(dimension=128)
    engine: Any = index._engine
    sent: list[Search] = []
    query = engine.query

    async def recording(searches: Sequence[Search]) -> Any:
        sent.extend(searches)
        return await query(searches)

    engine.query = recording
    compared = 0
    for text in questions(25):
        for groups in CALLERS:
            for limit in (5, 10):
                sent.clear()
                dense = embedder.embed([text], query=True)[0]
                hits = asyncio.run(
                    index.search(dense=dense, text=text, acl=AclFilter.for_groups(groups), limit=limit, mode="hybrid")
                )
                (fused,) = sent
                raw = engine._shard.query(previous_form(fused, engine))
                before = sorted(((str(p.id), p.score) for p in raw), key=lambda x: sort_hits_key(x[1], x[0]))
                assert_same_ranking([(h.chunk.id, h.score) for h in hits], before, limit, (text, groups, limit))
                compared += len(hits)
    assert compared > 500


def test_concurrent_searches_return_what_one_at_a_time_returns(index: QdrantIndex) -> None:
    embedder = HashEmbedder(dimension=128)
    asks = [(text, frozenset(groups)) for text in questions(30) for groups in CALLERS]

    def ask(text: str, groups: frozenset[str]) -> list[tuple[str, float]]:
        dense = embedder.embed([text], query=True)[0]
        acl = AclFilter.for_groups(set(groups))
        hits = asyncio.run(index.search(dense=dense, text=text, acl=acl, limit=10, mode="hybrid"))
        return [(h.chunk.id, h.score) for h in hits]

    alone = {a: ask(*a) for a in asks}
    assert all(alone.values())
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda a: (a, ask(*a)), asks * 4))
    assert len(together) == 4 * len(asks)
    for a, hits in together:
        assert_same_ranking(hits, alone[a], 10, a)

    async def gathered() -> list[Any]:  # the service's form: many requests on one event loop
        async def one(text: str, groups: frozenset[str]) -> list[tuple[str, float]]:
            dense = embedder.embed([text], query=True)[0]
            acl = AclFilter.for_groups(set(groups))
            return [(h.chunk.id, h.score) for h in await index.search(dense=dense, text=text, acl=acl, limit=10)]

        return await asyncio.gather(*(one(*a) for a in asks))

    for a, hits in zip(asks, asyncio.run(gathered()), strict=True):
        assert_same_ranking(hits, alone[a], 10, a)
