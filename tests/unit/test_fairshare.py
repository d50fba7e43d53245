"""The LLM share: work-conserving, fair between tenants, bounded waiting. Driven step by step on one
event loop: a slot is freed by the test, never by time passing (wait_s=0 is the only deadline used)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docquery.api.errors import ApiError
from docquery.api.fairshare import LlmShare, tenant_of
from docquery.core.domain import Principal

LONG = 3600.0  # a deadline no test reaches: every wait here ends by a release or an eviction


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def take(share: LlmShare, tenant: str) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(share.acquire(tenant))


def outcome(task: asyncio.Task[None]) -> str:
    if not task.done():
        return "waiting"
    err = task.exception()
    if err is None:
        return "granted"
    assert isinstance(err, ApiError) and err.status == 503 and err.headers["Retry-After"]
    return "503"


def test_one_tenant_alone_borrows_every_free_slot() -> None:
    async def t() -> None:
        share = LlmShare(64, 0.25, queue=0, wait_s=0)
        tasks = [take(share, "groups:eng") for _ in range(32)]
        await settle()
        assert [outcome(x) for x in tasks] == ["granted"] * 32  # no queue and no wait needed: no 503
        assert share.held("groups:eng") == 32 > share.per_tenant
        for _ in range(32):
            share.release("groups:eng")
        assert share.held("groups:eng") == 0

    run(t)


def test_with_every_slot_busy_a_request_waits_then_gets_the_freed_slot() -> None:
    async def t() -> None:
        share = LlmShare(4, 0.5, queue=4, wait_s=LONG)
        for _ in range(4):
            await share.acquire("a")
        waiting = take(share, "a")
        await settle()
        assert outcome(waiting) == "waiting"
        share.release("a")
        await settle()
        assert outcome(waiting) == "granted" and share.held("a") == 4

    run(t)


def test_waiting_is_bounded_by_the_deadline_and_the_queue() -> None:
    async def t() -> None:
        share = LlmShare(2, 0.5, queue=1, wait_s=0)
        await share.acquire("a")
        await share.acquire("a")
        late = take(share, "b")
        await settle()
        assert outcome(late) == "503" and share.waiting() == 0  # the deadline passed: out of the queue
        full = LlmShare(1, 1.0, queue=1, wait_s=LONG)
        await full.acquire("a")
        queued, refused = take(full, "a"), take(full, "a")
        await settle()
        assert (outcome(queued), outcome(refused)) == ("waiting", "503")
        queued.cancel()
        await settle()

    run(t)


def test_a_flooding_tenant_is_held_to_its_share_while_another_waits() -> None:
    async def t() -> None:
        share = LlmShare(8, 0.25, queue=6, wait_s=LONG)  # a share is two slots
        flood = [take(share, "a") for _ in range(8)]
        await settle()
        assert share.held("a") == 8  # nobody else asked: it borrowed every slot
        queued_a = [take(share, "a") for _ in range(4)]
        await settle()
        polite = [take(share, "b") for _ in range(2)]
        await settle()
        assert [outcome(x) for x in polite] == ["waiting", "waiting"]
        share.release("a")
        share.release("a")
        await settle()
        # The two freed slots went to b (under its share), not to a's earlier waiters.
        assert [outcome(x) for x in polite] == ["granted", "granted"]
        assert [outcome(x) for x in queued_a] == ["waiting"] * 4
        share.release("b")
        await settle()
        assert sum(outcome(x) == "granted" for x in queued_a) == 1  # b is not waiting now: a borrows again
        for x in [*flood, *queued_a]:
            x.cancel()
        await settle()

    run(t)


def test_a_full_queue_evicts_the_richest_tenants_newest_waiter() -> None:
    async def t() -> None:
        share = LlmShare(4, 0.25, queue=3, wait_s=LONG)
        for _ in range(4):
            await share.acquire("a")
        queued_a = [take(share, "a") for _ in range(3)]
        await settle()
        polite = take(share, "b")
        await settle()
        assert [outcome(x) for x in queued_a] == ["waiting", "waiting", "503"]
        assert outcome(polite) == "waiting"
        share.release("a")
        await settle()
        assert outcome(polite) == "granted"
        # A waiter no richer than every queued one is refused, not queued over them.
        again = take(share, "a")
        extra = take(share, "a")
        await settle()
        assert (outcome(again), outcome(extra)) == ("waiting", "503")
        for x in [*queued_a, again, extra]:
            x.cancel()
        await settle()

    run(t)


def test_a_waiter_that_leaves_gives_its_place_and_any_slot_back() -> None:
    async def t() -> None:
        share = LlmShare(1, 1.0, queue=2, wait_s=LONG)
        await share.acquire("a")
        leaving = take(share, "b")
        await settle()
        leaving.cancel()
        await settle()
        assert share.waiting() == 0
        share.release("a")
        assert share.held("a") == share.held("b") == 0
        await share.acquire("c")  # the slot is free again
        share.release("c")

    run(t)


@given(
    tenants=st.lists(st.sampled_from("abcd"), min_size=1, max_size=40),
    releases=st.lists(st.integers(0, 39), max_size=40),
    slots=st.integers(1, 8),
)
def test_no_slot_is_idle_while_someone_waits_and_none_is_lost(
    tenants: list[str], releases: list[int], slots: int
) -> None:
    async def t() -> None:
        share = LlmShare(slots, 0.25, queue=64, wait_s=LONG)
        tasks = [(name, take(share, name)) for name in tenants]
        counted: set[int] = set()
        holding: list[str] = []  # the tenant of every granted slot not yet given back

        def collect() -> None:
            for name, x in tasks:
                if id(x) not in counted and outcome(x) == "granted":
                    counted.add(id(x))
                    holding.append(name)

        await settle()
        collect()
        for i in [0, *releases]:
            if holding and i:
                share.release(holding.pop(i % len(holding)))
                await settle()
                collect()
            busy = sum(share.held(n) for n in "abcd")
            assert busy == len(holding) <= slots  # no slot lost, none given twice
            assert busy == slots or share.waiting() == 0  # work-conserving
        for _, x in tasks:
            x.cancel()
        await settle()

    run(t)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_n_keys_of_one_tenant_hold_one_share_while_others_wait(n: int) -> None:
    keys = [Principal(id=f"key:k{i}", groups=frozenset({"eng"}), tenant="acme") for i in range(n)]
    assert len({tenant_of(k) for k in keys}) == 1
    same_groups = [Principal(id=f"key:g{i}", groups=frozenset({"eng", "ops"})) for i in range(n)]
    assert len({tenant_of(k) for k in same_groups}) == 1
    other = Principal(id="jwt:bob", groups=frozenset({"hr"}))
    assert tenant_of(other) != tenant_of(keys[0]) != tenant_of(same_groups[0])

    async def t() -> None:
        share = LlmShare(8, 0.25, queue=16, wait_s=LONG)
        flood = [take(share, tenant_of(keys[i % n])) for i in range(16)]
        await settle()
        polite = [take(share, tenant_of(other)) for _ in range(share.per_tenant)]
        await settle()
        for _ in range(share.per_tenant):
            share.release(tenant_of(keys[0]))
            await settle()
        assert [outcome(x) for x in polite] == ["granted"] * share.per_tenant
        assert share.held(tenant_of(other)) == share.per_tenant
        for x in flood:
            x.cancel()
        await settle()

    run(t)


@pytest.mark.parametrize("bad", ["", " acme", "acme ", 7, ["acme"]])
def test_an_api_key_tenant_is_a_plain_string(bad: object) -> None:
    from docquery.api.auth.apikeys import ApiKeyFileError, parse_key_file

    entry = {"id": "k", "sha256": "0" * 64, "groups": ["eng"], "tenant": "acme"}
    assert parse_key_file([entry])[0][1].tenant == "acme"
    with pytest.raises(ApiKeyFileError, match="tenant"):
        parse_key_file([{**entry, "tenant": bad}])


def test_the_jwt_tenant_comes_from_the_configured_claim(tmp_path: Path) -> None:
    from docquery.api.auth.authenticator import JwtVerifier
    from docquery.config.settings import AuthSettings
    from docquery.secrets import FileSecretSource
    from tests.support.api_harness import AUDIENCE, ISSUER, JwtIssuer

    issuer = JwtIssuer()
    (tmp_path / "jwks.json").write_text(json.dumps(issuer.jwks()))
    settings = AuthSettings(jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_tenant_claim="org.id")
    verifier = JwtVerifier(settings, FileSecretSource(tmp_path))
    with_org = verifier.verify(issuer.token(org={"id": "acme"}))
    without = verifier.verify(issuer.token(sub="u2"))
    assert with_org is not None and tenant_of(with_org) == "tenant:acme"
    assert without is not None and tenant_of(without) == "groups:eng"
