"""Integration fixtures: one real OpenBao dev server per session (tests/support/openbao.py says how)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openbao import Bao, running_bao


@pytest.fixture(scope="session")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bao]:
    with running_bao(tmp_path_factory.mktemp("bao-home")) as server:
        yield server
