"""The fast tier's rule holds by itself: tests/unit/conftest.py fails a test there that starts a
subprocess or a server, wherever it starts it (the test, a fixture of any scope, a thread), and lets
the tiers outside it (slow, model, openbao) do so."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

GUARD = (Path(__file__).resolve().parent / "unit" / "conftest.py").read_text(encoding="utf-8")

PROBES = """
import multiprocessing, os, socket, subprocess, sys, threading
import pytest

def _listen():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()

@pytest.fixture(scope="module")
def module_server():
    _listen()

def test_subprocess_run():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_bare_command():
    subprocess.run(["true"], check=False)

def test_os_system():
    os.system("true")

def test_multiprocessing_spawn():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()

def test_multiprocessing_fork():
    p = multiprocessing.get_context("fork").Process(target=print)
    p.start()
    p.join()

def test_listening_socket():
    _listen()

def test_server_in_a_thread():
    t = threading.Thread(target=_listen)
    t.start()
    t.join()

def test_module_scoped_server(module_server):
    pass

def test_a_bound_socket_that_does_not_listen_is_fine():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))

@pytest.mark.slow
def test_slow_may_start_a_subprocess():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.model
def test_model_may_listen():
    _listen()
"""


def test_the_fast_tier_refuses_subprocesses_and_servers(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(GUARD)
    pytester.makeini("[pytest]\nmarkers =\n    slow: x\n    model: x\n    openbao: x\n")
    pytester.makepyfile(test_probes=PROBES)
    reports = pytester.inline_run("-p", "no:cacheprovider", "-W", "ignore").getreports("pytest_runtest_logreport")
    failed = {r.nodeid.split("::")[-1]: r.longreprtext for r in reports if r.failed}
    assert set(failed) == {
        "test_subprocess_run",
        "test_bare_command",
        "test_os_system",
        "test_multiprocessing_spawn",
        "test_multiprocessing_fork",
        "test_listening_socket",
        "test_server_in_a_thread",
        "test_module_scoped_server",
    }
    assert "started a subprocess: mark it slow, or move it to tests/integration" in failed["test_subprocess_run"]
    assert "started a process (os.system)" in failed["test_os_system"]
    assert "started a server (a listening socket)" in failed["test_server_in_a_thread"]
