"""The fast tier (`make unit`): every test here but those marked slow, model or openbao.

It starts no subprocess and no server, so it runs anywhere in seconds and nothing it does can collide with
another process. The rule holds by itself: such a test fails, with the call that broke it.
"""

from __future__ import annotations

import _posixsubprocess
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# The markers of tests that are not in the fast tier (pyproject.toml says what each means).
NOT_FAST = ("slow", "model", "openbao")


def _refuser(what: str, broken: list[str]) -> Callable[..., Any]:
    def refuse(*_args: object, **_kwargs: object) -> Any:
        message = f"a fast-tier test started {what}: mark it slow, or move it to tests/integration"
        if threading.current_thread() is not threading.main_thread():
            broken.append(message)  # the failure ends that thread, not the test: teardown reports it
        pytest.fail(message)

    return refuse


_GUARD = pytest.StashKey[tuple[pytest.MonkeyPatch, list[str]]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    # From the start of setup, so fixtures of any scope (a module's server) are held to it as well.
    if not any(item.get_closest_marker(name) for name in NOT_FAST):
        patch, broken = pytest.MonkeyPatch(), list[str]()
        # Popen (asyncio's subprocesses too) starts its child in _execute_child; multiprocessing's
        # spawn and forkserver call fork_exec themselves.
        patch.setattr(subprocess.Popen, "_execute_child", _refuser("a subprocess", broken))
        patch.setattr(_posixsubprocess, "fork_exec", _refuser("a subprocess", broken))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            patch.setattr(os, name, _refuser(f"a process (os.{name})", broken))
        patch.setattr(socket.socket, "listen", _refuser("a server (a listening socket)", broken))
        item.stash[_GUARD] = (patch, broken)
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        guard = item.stash.get(_GUARD, None)
        if guard is not None:
            patch, broken = guard
            patch.undo()
            if broken:
                pytest.fail(broken[0])
