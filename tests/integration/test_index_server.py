"""The server engine's client side: the API key read on every request, and concurrent creation.

The key tests run against a REST stand-in (``tests/support/standins/qdrant_rest.py``), since no
Qdrant server binary runs here; the creation race runs on qdrant-client's local mode.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

import pytest
from pydantic import SecretStr
from qdrant_client import QdrantClient

from docquery.core.collection import ModelMismatchError
from docquery.core.domain import AclFilter
from docquery.core.errors import VectorIndexError
from docquery.index import QdrantIndex, open_server
from docquery.index.server import ServerEngine
from tests.support.standins.qdrant_rest import StandInQdrant

pytestmark = pytest.mark.filterwarnings("ignore:Auth token provider is used with an insecure connection")

DIM = 4


class KeyFile:
    """The key provider as wiring builds it: reads the current value on every call."""

    def __init__(self, value: str | None) -> None:
        self.value = value
        self.reads = 0

    def __call__(self) -> SecretStr | None:
        self.reads += 1
        return None if self.value is None else SecretStr(self.value)


def _search(index: QdrantIndex) -> None:
    asyncio.run(index.search(dense=[0.5] * DIM, text="payroll", acl=AclFilter.for_groups({"hr"}), limit=3))


def test_a_rotated_key_is_used_by_the_next_request_of_either_client() -> None:
    with StandInQdrant(keys={"key-v1"}, model_id="m", dimension=DIM) as server:
        key = KeyFile("key-v1")
        index = open_server(url=server.url, api_key=key, name="c", model_id="m", dimension=DIM)
        try:
            assert server.seen and {s.key for s in server.seen} == {"key-v1"}
            _search(index)  # the async client
            assert server.seen[-1].path.endswith("/points/query/batch") and server.seen[-1].key == "key-v1"

            # Vault renders the new key; the server accepts only it from now on. No restart.
            key.value, server.keys = "key-v2", {"key-v2"}
            _search(index)
            index.count_chunks()  # the blocking client
            assert [s.key for s in server.seen[-2:]] == ["key-v2", "key-v2"]
            assert key.reads >= len(server.seen)  # read for every request, not once at start
        finally:
            index.close()


def test_a_key_that_disappears_fails_closed_without_naming_it() -> None:
    with StandInQdrant(keys={"key-never-shown"}, model_id="m", dimension=DIM) as server:
        key = KeyFile("key-never-shown")
        index = open_server(url=server.url, api_key=key, name="c", model_id="m", dimension=DIM)
        try:
            key.value = None  # the file was removed: send nothing rather than the old key
            sent = len(server.seen)
            for call in (lambda: _search(index), index.count_chunks):
                with pytest.raises(VectorIndexError, match="qdrant-api-key is missing") as err:
                    call()
                assert "key-never-shown" not in str(err.value)
            assert len(server.seen) == sent  # no request left without a key
        finally:
            index.close()


def test_no_key_configured_sends_no_credential() -> None:
    with StandInQdrant(keys={"k"}, model_id="m", dimension=DIM) as server:
        with pytest.raises(VectorIndexError, match="status 401"):
            open_server(url=server.url, api_key=KeyFile(None), name="c", model_id="m", dimension=DIM)
        assert {s.key for s in server.seen} == {None}


# -- concurrent creation (ingest shards of one Indexed Job) ---------------------------
def _open(client: QdrantClient, model_id: str = "m", **kwargs: Any) -> QdrantIndex:
    return open_server(url=":memory:", name="shared", model_id=model_id, dimension=DIM, client=client, **kwargs)


def test_a_shard_that_loses_the_create_race_opens_the_winners_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    client = QdrantClient(location=":memory:")
    winner = _open(client)
    winner.update_meta({"wrapped_key:1": "vault:v1:abc"})  # the winner has already started writing
    # The loser checked before the winner created it: its create then meets "already exists".
    exists, create = client.collection_exists, client.create_collection
    checks: list[str] = []
    refused: list[Exception] = []

    def racing_exists(name: str) -> bool:
        checks.append(name)
        return False if len(checks) == 1 else exists(name)

    def recording_create(*args: Any, **kwargs: Any) -> Any:
        try:
            return create(*args, **kwargs)
        except Exception as exc:
            refused.append(exc)
            raise

    monkeypatch.setattr(client, "collection_exists", racing_exists)
    monkeypatch.setattr(client, "create_collection", recording_create)
    loser = _open(client)
    assert [str(e) for e in refused] == ["Collection shared already exists"]  # the race happened, and was tolerated
    assert loser._engine.created is False
    meta = loser.read_meta()
    assert meta is not None and meta["wrapped_key:1"] == "vault:v1:abc"  # the meta point was not rewritten
    for index in (winner, loser):
        index.close()
    client.close()


class _OneCallAtATime:
    """A local-mode client shared by two threads, each call whole, as a server applies each request.

    Local mode keeps plain Python structures, and each engine locks only its own calls; two engines on
    one local client in two threads race inside it (an IndexError in a retrieve while the other thread
    upserts), which no server does.
    """

    def __init__(self, client: QdrantClient) -> None:
        self._client = client
        self._lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


def test_a_shard_waits_for_the_meta_point_the_creator_writes_last() -> None:
    local = QdrantClient(location=":memory:")
    client = cast(QdrantClient, _OneCallAtATime(local))
    creator = ServerEngine(url=":memory:", name="shared", dimension=DIM, client=client)  # created, no meta yet

    def finish_later() -> None:
        time.sleep(0.3)
        QdrantIndex(creator, name="shared", model_id="m", dimension=DIM)  # writes the meta point

    writer = threading.Thread(target=finish_later)
    writer.start()
    try:
        waiting = _open(client, meta_wait_s=10)
    finally:
        writer.join()
    assert waiting._engine.created is False and waiting.read_meta() is not None
    waiting.close()
    local.close()


def test_a_creation_that_stopped_before_its_meta_point_is_finished_by_the_next_open() -> None:
    client = QdrantClient(location=":memory:")
    ServerEngine(url=":memory:", name="shared", dimension=DIM, client=client)  # the creator died here
    index = _open(client, meta_wait_s=0.2)
    meta = index.read_meta()
    assert meta is not None and meta["model_id"] == "m"
    index.close()
    client.close()


def test_a_racing_shard_with_another_model_is_refused_after_the_create() -> None:
    client = QdrantClient(location=":memory:")
    _open(client, model_id="model-a").close()
    with pytest.raises(ModelMismatchError):
        _open(client, model_id="model-b")
    client.close()
