"""Fixture factories: one definition of the API harness ``h`` and of the vLLM stand-in, which a test
module or conftest instantiates with what it needs (``h = harness_fixture(VACATION, llm_server="server")``).

pytest finds a fixture by the name it is assigned to in a module or conftest, so each call makes one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:  # imported when a fixture runs: the root conftest imports this module for every test
    from tests.support.api_harness import Harness, JwtIssuer
    from tests.support.standins.openai_server import StandInOpenAIServer

Scope = Literal["function", "module", "session"]
# (doc_id, text, group): a one-chunk document the harness's index holds before the module's tests run.
Doc = tuple[str, str, str]

VACATION: Doc = ("vac", "The vacation policy grants 25 days of paid leave.", "eng")
VACATION_PER_YEAR: Doc = ("vac", "The vacation policy grants 25 days of paid leave per year.", "eng")


def harness_fixture(
    *docs: Doc,
    llm_server: str | None = None,
    llm_options: Mapping[str, Any] | None = None,
    prepare: Callable[[Harness], None] | None = None,
    **settings: Any,
) -> Any:
    """A module-scoped harness (one app and index per module: creating an Edge shard costs about a
    second) holding ``docs``. ``llm_server`` names the stand-in fixture its generator talks to (none:
    extractive answers), with ``llm_options`` for ``llm_generator``; ``prepare`` adds what a module
    needs beyond one-chunk documents; ``settings`` are ``make_harness``'s setting overrides."""

    @pytest.fixture(scope="module", name="h")
    def fixture(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, jwt_issuer: JwtIssuer
    ) -> Iterator[Harness]:
        from tests.support.api_harness import llm_generator, make_harness

        generator = None
        if llm_server is not None:
            generator = llm_generator(request.getfixturevalue(llm_server), **(llm_options or {}))
        tmp = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
        for harness in make_harness(tmp, generator=generator, jwks=jwt_issuer.jwks(), **settings):
            for doc_id, text, group in docs:
                harness.corpus.add(doc_id, [text], [group])
            if prepare is not None:
                prepare(harness)
            yield harness

    return fixture


def standin_fixture(*, scope: Scope = "function", name: str = "standin", **config: Any) -> Any:
    """A running vLLM stand-in on a free loopback port, its ``StandInConfig`` fields set from ``config``."""

    @pytest.fixture(scope=scope, name=name)
    def fixture() -> Iterator[StandInOpenAIServer]:
        from tests.support.standins.openai_server import StandInOpenAIServer

        with StandInOpenAIServer() as server:
            for field, value in config.items():
                if not hasattr(server.config, field):
                    raise TypeError(f"StandInConfig has no field {field!r}")
                setattr(server.config, field, value)
            yield server

    return fixture
