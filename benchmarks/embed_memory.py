"""The bundled model's memory over a service's mix of calls, with torch's kernel caches bounded or not.

    .venv/bin/python -m benchmarks.embed_memory --calls 1200 --rounds 1

Each side runs in a fresh process (the caches read their bound once, when torch builds its first
kernel), alternated bounded / default per round. The process loads the bundled model with the default
settings and makes the calls of a query service that also takes uploads: three passes of questions embedded
together (1 to 12 questions of 4 to 30 words) for each upload call (32 chunks of 60 to 200 words),
from a fixed seed, so both sides make the same calls. Printed per side: the RSS at the start and
every ``--every`` calls, and the seconds the calls took.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, random, sys, time
if sys.argv[1] == "bounded":
    from docquery.runtime.kernel_caches import bound_kernel_caches
    bound_kernel_caches()
from benchmarks.api_overhead import WORDS
from docquery.embedders.local import LocalEmbedder

def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))

calls, every = int(sys.argv[2]), int(sys.argv[3])
embedder = LocalEmbedder()
rng = random.Random(3)
text = lambda lo, hi: " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))
rows, t0 = [(0, rss_mb(), 0.0)], time.perf_counter()
for i in range(1, calls + 1):
    if i % 4 == 0:
        embedder.embed([text(60, 200) for _ in range(32)])
    else:
        embedder.embed([text(4, 30) for _ in range(rng.randint(1, 12))], query=True)
    if i % every == 0:
        rows.append((i, rss_mb(), round(time.perf_counter() - t0, 1)))
print(json.dumps(rows))
"""


def run_side(side: str, calls: int, every: int) -> list[tuple[int, int, float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        env.pop(name, None)  # the default side gets torch's defaults, whatever this shell sets
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, side, str(calls), str(every)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"the {side} run exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    rows: list[tuple[int, int, float]] = [tuple(r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1200)
    ap.add_argument("--every", type=int, default=200, help="read the RSS every this many calls")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    results: dict[str, list[Any]] = {"bounded": [], "default": []}
    for r in range(args.rounds):
        for side in ("bounded", "default") if r % 2 == 0 else ("default", "bounded"):
            rows = run_side(side, args.calls, args.every)
            results[side].append(rows)
            trace = ", ".join(f"{calls}: {mb}" for calls, mb, _ in rows)
            print(f"round {r + 1} {side}: RSS MB after calls {trace}; {rows[-1][2]} s, load {os.getloadavg()[0]:.1f}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
