"""Fixtures for the API tests; the harness they build is tests/support/api_harness.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api_harness import Harness, JwtIssuer, make_harness
from tests.support.fixtures import standin_fixture


@pytest.fixture(scope="session")
def jwt_issuer() -> JwtIssuer:
    return JwtIssuer()


@pytest.fixture
def harness(tmp_path: Path, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    yield from make_harness(tmp_path, jwks=jwt_issuer.jwks())


@pytest.fixture(scope="module")
def shared_harness(tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    """One app and index per module (creating an Edge shard costs about a second)."""
    yield from make_harness(tmp_path_factory.mktemp("api"), jwks=jwt_issuer.jwks())


# One vLLM stand-in per module, for harnesses built once per module (``standin`` is one per test).
server = standin_fixture(scope="module", name="server")
