"""docquery.runtime.kernel_caches: every process that embeds bounds torch's kernel caches.

The caches read their capacity once, inside torch; these tests check what the process sets, never
this process's torch. Every test runs with the variables as monkeypatch restores them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from docquery import wiring
from docquery.cli import main as cli_main
from docquery.core.errors import ConfigError
from docquery.runtime.kernel_caches import CAPACITY_VARIABLES, KERNEL_CACHE_SHAPES, bound_kernel_caches

BOUND = str(KERNEL_CACHE_SHAPES)


@pytest.fixture(autouse=True)
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CAPACITY_VARIABLES:  # tests/conftest.py puts them back as they were after each test
        monkeypatch.delenv(name, raising=False)


def _values() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in CAPACITY_VARIABLES}


def test_both_caches_are_bounded_when_nothing_sets_them() -> None:
    assert bound_kernel_caches() == dict.fromkeys(CAPACITY_VARIABLES, BOUND)
    assert _values() == dict.fromkeys(CAPACITY_VARIABLES, BOUND)


@pytest.mark.parametrize("given", [{name: value} for name in CAPACITY_VARIABLES for value in ("0", "4", "1024")])
def test_an_operators_own_capacity_stands(monkeypatch: pytest.MonkeyPatch, given: dict[str, str]) -> None:
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    others = {name: BOUND for name in CAPACITY_VARIABLES if name not in given}
    assert bound_kernel_caches() == others
    assert _values() == {**others, **given}


def test_a_second_call_changes_nothing() -> None:
    bound_kernel_caches()
    assert bound_kernel_caches() == {}
    assert _values() == dict.fromkeys(CAPACITY_VARIABLES, BOUND)


def _serve_until_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """The capacities ``serve`` has set when it builds its components (the model's first pass comes after)."""
    seen: dict[str, str | None] = {}

    def build_components(*_: object, **__: object) -> None:
        seen.update(_values())
        raise ConfigError("stopped where the model would load")

    monkeypatch.setattr(wiring, "build_components", build_components)
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_METRICS_PORT", "0")  # 9464 may be held by a running `docquery serve`
    assert cli_main(["serve", "--port", "0"]) == 2
    return seen


@pytest.mark.slow  # serve binds its API port
def test_serve_bounds_the_caches_before_it_loads_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _serve_until_the_model_loads(tmp_path, monkeypatch) == dict.fromkeys(CAPACITY_VARIABLES, BOUND)


@pytest.mark.slow  # serve binds its API port
def test_serve_keeps_an_operators_own_capacity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "64")
    seen = _serve_until_the_model_loads(tmp_path, monkeypatch)
    assert seen == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": BOUND, "LRU_CACHE_CAPACITY": "64"}
