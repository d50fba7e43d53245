"""One caller cannot starve the others: the LLM share by tenant, work-conserving, the failed-authentication
limit per address, and metrics labels from fixed sets only."""

from __future__ import annotations

import itertools
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from docquery.api.limits import AuthFailureLimiter
from docquery.api.metrics import KNOWN_METHODS
from tests.support.api_harness import Harness, JwtIssuer, bearer
from tests.support.fixtures import VACATION_PER_YEAR, harness_fixture
from tests.support.standins.openai_server import StandInOpenAIServer

ALICE = bearer("tok-alice-eng")
Q = {"question": "how many vacation days of paid leave"}
SLOTS, SHARE, QUEUE = 8, 0.25, 2  # a share is two in-flight LLM calls; two requests may wait


h = harness_fixture(
    VACATION_PER_YEAR,
    llm_server="server",
    llm_options={"max_concurrency": SLOTS},
    llm={"max_concurrency": SLOTS},
    api={
        "llm_share": SHARE,
        "llm_queue": QUEUE,
        "llm_queue_wait_s": 60,  # ends by a freed slot in these tests, never by the deadline
        "auth_failures_per_minute": 60,
        "auth_failure_burst": 5,
    },
)


# A follow-up: with an LLM, its rewrite into a standalone question is an LLM call of its own.
EARLIER = [
    {"role": "user", "content": "what does the leave policy say"},
    {"role": "assistant", "content": "It grants paid leave."},
]


def _body(endpoint: str, stream: bool, follow_up: bool) -> dict[str, Any]:
    history = EARLIER if follow_up else []
    if endpoint == "/v1/query":
        return {**Q, "stream": stream, **({"history": history} if follow_up else {})}
    messages = [*history, {"role": "user", "content": Q["question"]}]
    return {"model": "docquery", "messages": messages, "stream": stream}


@pytest.mark.slow  # bounds the wall-clock time
@pytest.mark.parametrize(
    "case", list(itertools.product(["/v1/query", "/v1/chat/completions"], [False, True], [False, True]))
)
def test_a_flooding_tenant_borrows_idle_slots_and_another_is_still_served(
    h: Harness, server: StandInOpenAIServer, jwt_issuer: JwtIssuer, case: tuple[str, bool, bool]
) -> None:
    endpoint, follow_up, stream = case
    server.config.first_token_delay_s = 1.5  # long enough that all requests overlap, even on a loaded machine
    other = bearer(jwt_issuer.token(sub="someone-else", groups=["hr"]))
    flood = SLOTS + QUEUE + 2
    calls_before, server.stats.max_in_flight = server.stats.chat_calls, 0
    greedy_body = _body(endpoint, stream, follow_up)
    try:
        with ThreadPoolExecutor(max_workers=flood + 1) as pool:
            greedy = [pool.submit(h.client.post, endpoint, json=greedy_body, headers=ALICE) for _ in range(flood)]
            time.sleep(0.5)
            polite = h.client.post(endpoint, json=_body(endpoint, stream, False), headers=other)
            assert polite.status_code == 200
            results = [f.result() for f in greedy]
    finally:
        server.config.first_token_delay_s = 0.0
    # Every slot was lent to the flood (8), two waited; the polite tenant took the place of the flood's newest
    # waiter and the first freed slot; the flood's two requests past the queue were refused at once.
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200] * (SLOTS + QUEUE - 1) + [503] * 3
    refused = [r for r in results if r.status_code == 503]
    assert all(r.json()["error"]["type"] == "overloaded" and r.headers["retry-after"] for r in refused)
    # Every LLM call of a request, a follow-up's rewrite too, runs under its slot: never more in flight than slots.
    assert server.stats.max_in_flight <= SLOTS
    assert server.stats.chat_calls - calls_before <= (SLOTS + QUEUE) * (2 if follow_up else 1)
    share = h.app.state.llm_share
    assert share.held("groups:eng") == 0 and share.held("groups:hr") == 0 and share.waiting() == 0
    assert h.client.post("/v1/query", json=Q, headers=ALICE).status_code == 200


def test_the_share_is_at_least_one_call() -> None:
    from docquery.api.fairshare import LlmShare

    assert LlmShare(1, 0.1).per_tenant == 1
    assert LlmShare(16, 0.25).per_tenant == 4


def test_failed_authentications_are_limited_without_revealing_the_credential(h: Harness) -> None:
    for _ in range(3):
        assert h.client.get("/v1/models").status_code == 401  # no credential: not a guess, not counted
    for i in range(5):
        assert h.client.get("/v1/models", headers=bearer(f"guess-{i}")).status_code == 401
    wrong = h.client.get("/v1/models", headers=bearer("guess-5"))
    right = h.client.get("/v1/models", headers=ALICE)
    assert wrong.status_code == right.status_code == 429
    # The same answer for a valid key as for a guess: nothing to learn from it.
    strip = lambda r: {**r.json()["error"], "request_id": ""}  # noqa: E731
    assert strip(wrong) == strip(right) and wrong.headers["retry-after"] == right.headers["retry-after"]
    h.app.state.auth_failures = AuthFailureLimiter(60, 5)  # the next tests start afresh


def test_the_failure_budget_is_per_address_and_refills() -> None:
    now = [0.0]
    limiter = AuthFailureLimiter(60, 3, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.blocked("10.0.0.1") is None
        limiter.failed("10.0.0.1")
    assert limiter.blocked("10.0.0.1") == pytest.approx(1.0)
    assert limiter.blocked("10.0.0.2") is None
    now[0] = 1.0
    assert limiter.blocked("10.0.0.1") is None


def test_metrics_labels_come_from_fixed_sets(h: Harness) -> None:
    for i in range(60):
        h.client.request(f"M{i}ETHOD", f"/v1/random/{i}?x={i}", headers=ALICE)
        h.client.request("GET", f"/nope-{i}")
    h.client.post("/v1/query", json=Q, headers=ALICE)
    text = h.app.state.metrics.render().decode()
    series = re.findall(r"^docquery_http_requests_total\{(.*)\} ", text, re.MULTILINE)
    routes = set(h.client.get("/openapi.json").json()["paths"]) | {"/healthz", "/readyz", "unmatched"}
    for labels in series:
        values = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        assert values["method"] in KNOWN_METHODS | {"other"}
        assert values["status"] in {"1xx", "2xx", "3xx", "4xx", "5xx"}
        assert values["route"] in routes
    assert len(series) < 12
