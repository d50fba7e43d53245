"""docquery.runtime.kernel_caches: a bulk-embedding process bounds torch's kernel caches.

The caches read their capacity once, inside torch; these tests check what the process sets, never
this process's torch. Every test runs with the variables as monkeypatch restores them.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterator

import pytest

from docquery.runtime import malloc
from docquery.runtime.kernel_caches import CAPACITY_VARIABLES, KERNEL_CACHE_SHAPES, bound_kernel_caches

BOUND = str(KERNEL_CACHE_SHAPES)


@pytest.fixture(autouse=True)
def unset(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in CAPACITY_VARIABLES:
        monkeypatch.setenv(name, "registered")  # so that teardown restores the variable as it was
        monkeypatch.delenv(name)
    yield


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


class _Mallopt:
    argtypes: object = None
    restype: object = None

    def __call__(self, *_: int) -> int:
        return 1


class _Libc:
    mallopt = _Mallopt()


@pytest.mark.parametrize("libc", [("glibc", "2.36"), ("musl", "1.2")])
def test_tuning_for_bulk_embedding_bounds_the_caches_on_any_c_library(
    monkeypatch: pytest.MonkeyPatch, libc: tuple[str, str]
) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "libc_ver", lambda: libc)
    monkeypatch.setattr(ctypes, "CDLL", lambda _: _Libc())
    monkeypatch.setattr(malloc, "_tuned", [])  # this process's own malloc is never touched
    malloc.tune_for_bulk_embedding()
    assert _values() == dict.fromkeys(CAPACITY_VARIABLES, BOUND)
