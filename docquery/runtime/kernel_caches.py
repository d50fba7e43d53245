"""Bounds on torch's CPU kernel caches, for every process that embeds (``ingest``, ``eval``, ``serve``).

torch runs the model's matrix products on CPU through oneDNN, which builds a kernel for each input
shape and keeps it in two caches, oneDNN's own and ideep's (torch's wrapper), each of up to 1,024
shapes by default. A pass's shape is its text count times its padded length, so nearly every pass
of a bulk call is a shape not seen before: the caches filled through the whole run and held the
kernels and their buffers. On three calls of 1,024 chunks of PostgreSQL's manual, the heap in use
after each call rose by 25 MB a call and the peak went 652, 712, 761 MB; with both caches at 8
shapes, 171 MB in use and a peak of 492 to 502 MB after every call, for the same CPU time (a
kernel is rarely reused when shapes rarely repeat). Figures in docs/benchmarks.md, "Memory".

The query service grows the same way: questions embedded together make a pass of any count and
length, and the upload worker's calls are bulk calls. The model alone, in a mix like the service's
(``benchmarks/embed_memory.py``), went from 461 MB RSS to 1,640 and 1,713 MB over 1,200 calls,
still rising, with the default caches; at 16 shapes it held 651 to 672 MB, in the same time.

Both caches read their capacity from the environment once, when torch builds its first kernel, so
:func:`bound_kernel_caches` must run before the model's first pass: ``ingest``, ``eval`` and
``serve`` call it first, whether or not they tune malloc (``embedder.tune_malloc``).
"""

from __future__ import annotations

import os

# Shapes each cache keeps: one pass uses 3 (the attention's projections, the feed-forward's two
# products); 16 covers 4 workers' passes at once with room for a repeated shape.
KERNEL_CACHE_SHAPES = 16
# oneDNN's primitive cache, and ideep's LRU cache of the primitives torch builds through it.
CAPACITY_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_kernel_caches() -> dict[str, str]:
    """Set each cache's capacity to ``KERNEL_CACHE_SHAPES`` unless the environment already sets it (an
    operator's own value stands); returns the variables this call set. Subprocesses inherit them."""
    set_now: dict[str, str] = {}
    for name in CAPACITY_VARIABLES:
        if name not in os.environ:
            os.environ[name] = set_now[name] = str(KERNEL_CACHE_SHAPES)
    return set_now
