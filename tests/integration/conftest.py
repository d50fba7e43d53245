"""Integration fixtures: one real OpenBao dev server per session (tests/support/openbao.py says how), and
collections opened on both engine paths."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from docquery.index import QdrantIndex, open_edge, open_server
from tests.support.openbao import Bao, running_bao

INDEX_DIM = 8  # the dimension of the collections ``opener`` opens
IndexOpener = Callable[[str], QdrantIndex]


@pytest.fixture(scope="session")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bao]:
    with running_bao(tmp_path_factory.mktemp("bao-home")) as server:
        yield server


@pytest.fixture(params=["edge", "server"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexOpener]:
    """Opens a collection by name on the embedded engine, then on the server path (qdrant-client's local
    mode), as the same tests run on both; every collection opened is closed after the test."""
    opened: list[QdrantIndex] = []

    def open_one(name: str) -> QdrantIndex:
        if request.param == "edge":
            index = open_edge(tmp_path / name, name=name, model_id="m", dimension=INDEX_DIM)
        else:
            index = open_server(url=":memory:", name=name, model_id="m", dimension=INDEX_DIM)
        opened.append(index)
        return index

    yield open_one
    for index in opened:
        index.close()
