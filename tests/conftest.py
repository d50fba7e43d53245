"""Root fixtures. Heavy real components are session-scoped and loaded once."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from docquery.config.settings import Settings
from docquery.runtime.kernel_caches import CAPACITY_VARIABLES
from tests.support.fakes import HashEmbedder
from tests.support.fixtures import standin_fixture

# Property tests draw the same examples on every run, so the suite is deterministic; set
# HYPOTHESIS_PROFILE=explore to draw new ones (and keep failures in .hypothesis/).
hypothesis_settings.register_profile("deterministic", derandomize=True, database=None)
hypothesis_settings.register_profile("explore")
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


# Fixtures that bring up a heavy real component -> the marker that says so (`make unit` deselects them).
_MARKER_OF_FIXTURE = {"local_embedder": "model", "bao": "openbao"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            marker = _MARKER_OF_FIXTURE.get(fixture)
            if marker is not None:
                item.add_marker(marker)


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """A test that runs ``main()`` in-process configures the root and uvicorn loggers
    (docquery/runtime/logs.py); they are put back after it, so no later test logs through its handler
    (audit lines reached the suite's own output) or depends on its format (the parse process logs in it)."""
    loggers = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


@pytest.fixture(autouse=True)
def _no_event_loop_left_running(request: pytest.FixtureRequest) -> None:
    """A fixture that leaves an event loop marked running in the main thread (Playwright's sync API
    does, until it stops) fails every later test that calls asyncio.run; this names the cause instead."""
    if request.path.parent.name == "browser":
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    pytest.fail(f"an event loop is left running in the main thread before this test: {loop!r}")


@pytest.fixture(autouse=True)
def _clean_docquery_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never inherit a developer's DOCQUERY_* environment."""
    for name in list(os.environ):
        if name.startswith("DOCQUERY_"):
            monkeypatch.delenv(name)
    # CLI commands run in this process must not mallopt it: that would change the test session's
    # allocator for good. Tests of the tuning set this themselves; the kill-and-rerun test runs
    # the CLI in a process of its own without DOCQUERY_* variables, so tuned as in production.
    monkeypatch.setenv("DOCQUERY_EMBEDDER__TUNE_MALLOC", "false")
    # Commands that embed set torch's kernel cache bounds in os.environ: each test leaves them as it found them.
    for name in CAPACITY_VARIABLES:
        was = os.environ.get(name)
        monkeypatch.setenv(name, was or "registered")  # recorded, so that teardown puts back what was
        if was is None:
            monkeypatch.delenv(name)


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    d = tmp_path / "secrets"
    d.mkdir()
    return d


@pytest.fixture
def settings(tmp_path: Path, secrets_dir: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", secrets_dir=secrets_dir)


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


# A vLLM stand-in on a free loopback port, one per test (tests/support/fixtures.py makes others).
standin = standin_fixture()


@pytest.fixture(scope="session")
def local_embedder() -> Iterator[object]:
    """The real bundled all-MiniLM-L6-v2 (about 5 s to load, once per session)."""
    from docquery.embedders.local import LocalEmbedder

    yield LocalEmbedder()
