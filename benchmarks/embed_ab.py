"""A/B of embedder variants on exactly the chunks DocQuery embeds for the first N SciFact documents.

Two embedders are loaded in one process, A and B, each set up by a named variant below; they embed
every chunk in calls of 1,024 (as ``docquery ingest`` does), alternating A, B, A, B, ... for
``--pairs`` pairs. Each run records the process's CPU seconds (user + sys over all threads, from
``getrusage``) and its wall time; the table gives every run and the medians. B's vectors are
compared with A's (cosine per chunk, minimum and median), so a variant that changes the numerics is
seen with its saving. ``--profile VARIANT`` instead prints ``torch.profiler``'s operator table for
one call of 1,024 chunks on one thread; ``--tokenize`` times only the tokenizing ``encode`` does.

    .venv/bin/python benchmarks/embed_ab.py --a current --b bf16-linear [--pairs 3] [--docs 1000]
    .venv/bin/python benchmarks/embed_ab.py --profile current
    .venv/bin/python benchmarks/embed_ab.py --tokenize
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from ingest_throughput import cpu_s, docquery_chunks, write_corpus  # noqa: E402

CALL = 1024


def thread_cpu() -> dict[int, float]:
    """CPU seconds of each of this process's threads so far, from /proc (the tokenizer's and
    torch's own pools are threads Python does not know about)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited meanwhile
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _bf16_linear(emb: Any) -> None:
    """Linear weights stored in bfloat16 once; autocast still runs the rest as before."""
    import torch

    for module in emb._model.modules():
        if isinstance(module, torch.nn.Linear):
            module.to(torch.bfloat16)


def _attn(name: str) -> Callable[[Any], None]:
    def setup(emb: Any) -> None:
        emb._model[0].auto_model.set_attn_implementation(name)

    return setup


def _batch(n: int) -> Callable[[Any], None]:
    def setup(emb: Any) -> None:
        emb._batch_size = n

    return setup


def _workers(n: int) -> Callable[[Any], None]:
    def setup(emb: Any) -> None:
        emb.workers = n

    return setup


VARIANTS: dict[str, Callable[[Any], None]] = {
    "current": lambda emb: None,
    "bf16-linear": _bf16_linear,
    "eager": _attn("eager"),
    "sdpa": _attn("sdpa"),
    "batch16": _batch(16),
    "batch64": _batch(64),
    "batch128": _batch(128),
    "workers1": _workers(1),
}


def load(variant: str) -> Any:
    from docquery.embedders.local import LocalEmbedder

    emb = LocalEmbedder()
    VARIANTS[variant](emb)
    emb.embed(["warm up the model"] * 8)
    return emb


def chunks(docs: int, embedder: Any) -> list[str]:
    from docquery.config.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="embed-ab-"))
    write_corpus(tmp / "corpus", docs)
    return docquery_chunks(tmp / "corpus", Settings(data_dir=tmp / "unused"), embedder)


def run(emb: Any, texts: list[str]) -> tuple[float, float, list[list[float]], list[float]]:
    """CPU and wall seconds of embedding every chunk, the vectors, and the CPU of each thread
    that used at least 0.05 s of it, largest first."""
    th0, c0, t0 = thread_cpu(), cpu_s(), time.perf_counter()
    out: list[list[float]] = []
    for i in range(0, len(texts), CALL):
        out.extend(emb.embed(texts[i : i + CALL]))
    cpu, wall, th1 = cpu_s() - c0, time.perf_counter() - t0, thread_cpu()
    per_thread = sorted((v - th0.get(k, 0.0) for k, v in th1.items()), reverse=True)
    return cpu, wall, out, [x for x in per_thread if x >= 0.05]


def cosines(a: list[list[float]], b: list[list[float]]) -> list[float]:
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return list((x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)))


def profile(variant: str, texts: list[str]) -> None:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    emb = load(variant)
    emb.workers = 1
    torch.set_num_threads(1)
    call = texts[:CALL]
    emb.embed(call[:64])
    c0 = cpu_s()
    with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        emb.embed(call)
    print(f"{variant}: one call of {len(call)} chunks, 1 thread, {cpu_s() - c0:.1f} CPU s under the profiler")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    casts = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::_to_copy"]
    for e in sorted(casts, key=lambda e: -e.self_cpu_time_total)[:12]:  # which tensors are cast, how often
        print(f"_to_copy {e.input_shapes[:1]}: {e.count} calls, {e.cpu_time_total / 1e6:.3f} s")


def tokenize_ab(emb: Any, texts: list[str], pairs: int) -> None:
    """The tokenizing ``encode`` does (its passes of 32, longest first), with the tokenizer's
    thread pool and without it (``TOKENIZERS_PARALLELISM=false``, read at each call)."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    passes = [[texts[j] for j in order[i : i + 32]] for i in range(0, len(order), 32)]
    for i in range(pairs):
        for parallel in (True, False):
            if parallel:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = "false"
            c0, t0 = cpu_s(), time.perf_counter()
            for batch in passes:
                emb._model[0].preprocess(batch)
            label = "pool" if parallel else "no pool"
            print(f"pair {i} tokenize, {label}: {cpu_s() - c0:.2f} CPU s, {time.perf_counter() - t0:.2f} s wall")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", default="current", choices=VARIANTS)
    ap.add_argument("--b", default="current", choices=VARIANTS)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--profile", default=None, choices=VARIANTS)
    ap.add_argument("--tokenize", action="store_true", help="time only the tokenizing encode does")
    args = ap.parse_args()

    from docquery.runtime.malloc import tune_for_bulk_embedding

    tune_for_bulk_embedding()  # as `docquery ingest` does, for both variants alike
    a = load(args.a)
    texts = chunks(args.docs, a)
    print(f"{args.docs} docs -> {len(texts)} chunks, calls of {CALL}", flush=True)
    if args.profile:
        profile(args.profile, texts)
        return 0
    if args.tokenize:
        tokenize_ab(a, texts, args.pairs)
        return 0
    b = load(args.b)
    rows: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    first: dict[str, list[list[float]]] = {}
    for i in range(args.pairs):
        for name, emb in (("A", a), ("B", b)) if i % 2 == 0 else (("B", b), ("A", a)):
            cpu, wall, vectors, threads = run(emb, texts)
            rows[name].append((cpu, wall))
            print(f"pair {i} {name} ({args.a if name == 'A' else args.b}): {cpu:.1f} CPU s, {wall:.1f} s wall, "
                  f"load {os.getloadavg()[0]:.1f}; threads {', '.join(f'{x:.1f}' for x in threads)}",
                  flush=True)  # fmt: skip
            first.setdefault(name, vectors)
    sims = cosines(first["A"], first["B"])
    print(f"\nB against A, cosine per chunk: min {min(sims):.6f}, median {statistics.median(sims):.6f}")
    print("\n| run | CPU s per run | median | wall s per run | median |\n|---|---|---:|---|---:|")
    for name, label in (("A", args.a), ("B", args.b)):
        c, w = [r[0] for r in rows[name]], [r[1] for r in rows[name]]
        print(f"| {name}: {label} | {', '.join(f'{x:.1f}' for x in c)} | {statistics.median(c):.1f} "
              f"| {', '.join(f'{x:.1f}' for x in w)} | {statistics.median(w):.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
