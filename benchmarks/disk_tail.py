"""How long a read that misses the page cache waits on this machine's disk, now.

    .venv/bin/python -m benchmarks.disk_tail FILE [--seconds 10]

One read at a time, 4 KiB at a random aligned offset of FILE, with ``O_DIRECT`` so that the page
cache answers none of them: what a major page fault on a segment file waits for. A query that
faults in ten pages waits for the slowest of ten such reads, so its p99 follows the disk's p99.9.
``benchmarks/scale.py`` probes the collection's largest file before and after its timed queries, so
that a run's p99 can be read against the disk's own tail at that moment (docs/benchmarks.md, "The
1M p99 is this VM's disk tail").
"""

from __future__ import annotations

import argparse
import errno
import json
import mmap
import os
import random
import time
from pathlib import Path

from benchmarks.synthetic import percentile

BLOCK = 4096


def read_latencies(path: Path, seconds: float, *, rng: random.Random | None = None) -> list[float] | None:
    """Ascending milliseconds of one-at-a-time random block reads of ``path`` for ``seconds``.

    None where the file system refuses ``O_DIRECT`` (some tmpfs and overlay mounts) or the file holds
    no whole block: a probe through the page cache would measure memory, not the disk.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as err:
        if err.errno == errno.EINVAL:
            return None
        raise
    try:
        blocks = os.fstat(fd).st_size // BLOCK
        if blocks == 0:
            return None
        pick = rng or random.Random()
        out: list[float] = []
        with mmap.mmap(-1, BLOCK) as buf:  # page-aligned, as O_DIRECT requires
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                offset = pick.randrange(blocks) * BLOCK
                t0 = time.perf_counter()
                try:
                    os.preadv(fd, [buf], offset)
                except OSError as err:
                    if err.errno == errno.EINVAL:
                        return None
                    raise
                out.append((time.perf_counter() - t0) * 1000)
        return sorted(out)
    finally:
        os.close(fd)


def summary(sorted_ms: list[float], seconds: float) -> dict[str, float]:
    """Reads a second and the latency percentiles (ms) of one probe."""
    return {
        "reads_per_s": round(len(sorted_ms) / seconds),
        "p50_ms": round(percentile(sorted_ms, 50), 3),
        "p99_ms": round(percentile(sorted_ms, 99), 3),
        "p999_ms": round(percentile(sorted_ms, 99.9), 3),
        "max_ms": round(sorted_ms[-1], 3),
    }


def largest_file(root: Path) -> Path | None:
    files = [f for f in root.rglob("*") if f.is_file()]
    return max(files, key=lambda f: f.stat().st_size, default=None)


def probe(path: Path, seconds: float) -> dict[str, float] | None:
    """``summary`` of a probe of ``path``, or None where it cannot bypass the page cache."""
    ms = read_latencies(path, seconds)
    return None if not ms else summary(ms, seconds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path, help="a large file on the disk to probe (a segment's vector file)")
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    if not args.file.is_file():
        ap.error(f"{args.file}: not a file")
    result = probe(args.file, args.seconds)
    if result is None:
        ap.error(f"{args.file}: its file system does not allow O_DIRECT reads, or it is under {BLOCK} bytes")
    print(json.dumps({"file": str(args.file), "seconds": args.seconds, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
