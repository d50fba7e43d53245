"""What glibc does with the bulk-embedding tuning, in a child process (mallopt changes a process for
good): freed buffers stay in the process, fragmented between blocks that live on, until
``give_back_kept_memory`` returns them. The child frees buffers of many sizes, as embed passes of
different lengths do, with a long-lived small block after each."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the tuning is glibc's own"),
]

CHILD = """
import json, sys
from docquery.runtime import malloc

def anon_mb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024

tune = sys.argv[1] == "tune"
if tune:
    assert malloc.tune_for_bulk_embedding()
start = anon_mb()
kept, buffers = [], []
for i in range(60):
    buffers.append(bytearray(b"x" * ((4 << 20) + i * 65536)))  # 4 to 8 MiB, every page touched
    kept.append(bytearray(b"k" * 4096))  # lives on between them, as texts and vectors do
peak = anon_mb()
del buffers
freed = anon_mb()
gave = malloc.give_back_kept_memory()
print(json.dumps({"start": start, "peak": peak, "freed": freed, "after": anon_mb(), "gave": gave}))
"""


def _run(mode: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True, timeout=60)
    return dict(json.loads(out.stdout))


def test_tuned_process_keeps_freed_buffers_until_it_gives_them_back() -> None:
    got = _run("tune")
    grown = got["peak"] - got["start"]
    assert grown > 300  # 60 buffers of 4 to 8 MiB
    assert got["freed"] > got["start"] + 0.8 * grown  # kept: the heap is neither trimmed nor unmapped
    assert got["gave"]
    assert got["after"] < got["start"] + 0.1 * grown  # all but the small blocks went back


def test_an_untuned_process_has_nothing_to_give_back() -> None:
    got = _run("plain")
    assert not got["gave"]
