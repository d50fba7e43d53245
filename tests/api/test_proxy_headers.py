"""Through a real socket with ``docquery serve``'s uvicorn options: X-Forwarded-For from loopback is not believed
unless ``api.trusted_proxies`` names it, so rotating the header does not buy fresh failed-authentication budget."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from docquery.api.server import server_options
from tests.support.api_harness import Harness, bearer, make_harness

BURST = 3
GUESSES = 12


def _serve(h: Harness) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(h.app, lifespan="off", **server_options("critical", h.settings.api))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


def _harness(tmp: Path, trusted: list[str]) -> Iterator[Harness]:
    api = {"auth_failures_per_minute": 1, "auth_failure_burst": BURST, "trusted_proxies": trusted}
    yield from make_harness(tmp, api=api)


@pytest.fixture
def untrusted(tmp_path: Path) -> Iterator[str]:
    for h in _harness(tmp_path, []):
        yield from _serve(h)


@pytest.fixture
def trusted(tmp_path: Path) -> Iterator[str]:
    for h in _harness(tmp_path, ["127.0.0.1/32"]):
        yield from _serve(h)


def _guess(client: httpx.Client, forwarded: str, token: str = "wrong-guess") -> int:  # noqa: S107 (a guess)
    headers = {**bearer(token), "X-Forwarded-For": forwarded, "X-Real-IP": forwarded, "Forwarded": f"for={forwarded}"}
    return client.get("/v1/documents", headers=headers).status_code


def _rotating(n: int) -> list[str]:
    return [f"198.51.{i // 250}.{i % 250 + 1}" for i in range(n)] + [f"2001:db8:{i:x}::1" for i in range(n)]


def test_rotated_forwarded_headers_from_an_untrusted_peer_share_the_peer_budget(untrusted: str) -> None:
    with httpx.Client(base_url=untrusted, timeout=5) as client:
        statuses = [_guess(client, xff) for xff in _rotating(GUESSES)[:GUESSES]]
        assert statuses[:BURST] == [401] * BURST
        assert set(statuses[BURST:]) == {429}
        # Blocked whatever credential comes next, a valid one too (so the 429 reveals nothing).
        assert _guess(client, "203.0.113.7", token="tok-alice-eng") == 429


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_budget(trusted: str) -> None:
    with httpx.Client(base_url=trusted, timeout=5) as client:
        assert {_guess(client, xff) for xff in _rotating(GUESSES)} == {401}
        # One IPv6 /64 under rotating spellings and interface ids is one client.
        same_64 = ["2001:db8:aa::1", "2001:DB8:AA:0:0:0:0:2", "2001:db8:aa::ffff:1", "[2001:db8:aa::3]:1234"]
        statuses = [_guess(client, f"203.0.113.9, {xff}") for xff in same_64 * 2]
        assert statuses[:BURST] == [401] * BURST
        assert set(statuses[BURST:]) == {429}
        # A client that prepends hops does not escape: the proxy's own hop is the one taken.
        assert _guess(client, "192.0.2.1, 2001:db8:aa::9") == 429
        assert _guess(client, "2001:db8:bb::1", token="tok-alice-eng") == 200
