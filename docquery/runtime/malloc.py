"""glibc malloc settings for a process that embeds in bulk (``docquery ingest``, ``docquery eval``).

torch on CPU allocates every intermediate tensor afresh: a pass of 32 chunks makes hundreds of
buffers of 1 to 25 MB and frees them again. glibc's defaults hand buffers that large back to
the kernel (``mmap``/``munmap`` above a threshold, and trimming of each thread's heap), so
every pass faults all of its memory in again, a page at a time, and the kernel zeroes each
page. Embed workers are threads with an arena of their own, which glibc trims as well. The
page faults and kernel time this saves are measured in docs/design.md.

:func:`tune_for_bulk_embedding` keeps freed memory in the process instead:

- every thread allocates from the main arena (``M_ARENA_MAX`` = 1), so no per-thread heap is
  grown and trimmed around each pass;
- blocks up to 32 MiB (the most glibc accepts on 64-bit) come from the heap, not ``mmap``;
- up to 1 GiB of free memory at the top of the heap is kept, not returned.

Kept memory fragments: passes of different lengths leave holes that later buffers do not fit,
so the heap grew with every embed call while what was in use stayed flat (measured in docs/benchmarks.md, "Memory").
:func:`give_back_kept_memory` hands the free pages back
(``malloc_trim``, which also releases whole free pages inside the heap), once per embed call
of many passes: the passes of one call still reuse each other's buffers, and the process's
size is bounded by one call's working set, not by the length of the run.

Bulk jobs call this; the query service does not. torch's kernel caches, the other memory a bulk
run used to grow by, are bounded apart, in every process that embeds (docquery/runtime/kernel_caches.py).

It must run before the threads it should cover make their first allocation (a thread keeps the
arena it first got), so the CLI calls it before building any component. It changes the whole
process and cannot be undone; tests call it in a child process only.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger("docquery.runtime.malloc")

# mallopt(3) parameters, from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc refuses more than HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
TRIM_THRESHOLD = 1024 * 1024 * 1024

SETTINGS = ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))

_tuned: list[ctypes.CDLL] = []  # the C library, once this process keeps freed memory


def tune_for_bulk_embedding() -> bool:
    """Apply the settings above; True when all took effect. On a C library other than glibc
    (musl, macOS) they are skipped and it returns False: the settings are glibc's own."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        log.info("malloc tuning skipped: not glibc")
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.warning("malloc tuning skipped: mallopt not found")
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    applied = all([mallopt(param, value) == 1 for param, value in SETTINGS])  # a list: try every one
    if not applied:
        log.warning("malloc tuning: glibc refused a setting; bulk embedding may fault more")
    _tuned[:] = [libc]  # even a partly applied tuning keeps memory that only a trim gives back
    return applied


def give_back_kept_memory() -> bool:
    """Return the free memory the tuning kept to the kernel; True when it ran. Does nothing in a
    process that was not tuned (the query service), where glibc trims by itself."""
    if not _tuned:
        return False
    trim = _tuned[0].malloc_trim
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    trim(0)  # 0: keep no slack at the top; returns whether anything was released, which does not matter
    return True
