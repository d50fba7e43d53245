"""The evaluation run: chunk, embed, ingest into a throwaway Edge shard, search, score.

Queries go through ``QdrantIndex.search``, the same call the service makes, with
an ACL filter in place, so the figures describe the product's retrieval path.
Document score = the best score among its chunks.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from docquery.chunking import ChunkSpec, Section, SentenceChunker, TitlePrefix, Tokenizer, tokenizer_for
from docquery.core.collection import chunk_point_id
from docquery.core.domain import AclFilter, Chunk, IndexedChunk
from docquery.core.ports import Embedder, SearchMode
from docquery.evaluation.beir import BeirDataset, load_beir
from docquery.evaluation.cache import Matrix, embed_all
from docquery.evaluation.metrics import Run, mean_scores, per_query
from docquery.evaluation.progress import NullProgress, Progress
from docquery.index import FusionParams, IndexTuning, QdrantIndex, open_edge

log = logging.getLogger(__name__)

EVAL_GROUP = "eval"


@dataclass(frozen=True)
class EvalConfig:
    mode: SearchMode = "hybrid"
    split: str = "test"
    # The product's chunk settings (ingest.chunk_tokens/chunk_overlap); None: one chunk per document.
    chunks: ChunkSpec | None = field(default_factory=ChunkSpec)
    depth: int = 100  # documents kept per query (Recall@100 needs 100)
    cache_dir: Path | None = None


@dataclass(frozen=True)
class EvalChunk:
    doc_id: str
    index: int
    title: str
    text: str
    embed: str = ""  # what is embedded (the text with its title prefix, as ingest embeds it)


@dataclass
class EvalResult:
    metrics: dict[str, float]
    mode: str
    split: str
    n_queries: int
    n_docs: int
    n_chunks: int
    seconds: float
    extra: dict[str, float] = field(default_factory=dict)
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)  # query id -> metric -> value

    def as_json(self) -> dict[str, object]:
        return {**{k: round(v, 4) for k, v in self.metrics.items()}, "mode": self.mode,
                "split": self.split, "n_queries": self.n_queries, "n_docs": self.n_docs,
                "n_chunks": self.n_chunks, "seconds": round(self.seconds, 1)}  # fmt: skip


def chunk_corpus(dataset: BeirDataset, tokenizer: Tokenizer, spec: ChunkSpec | None) -> list[EvalChunk]:
    """Each document, "title\n\ntext" as a text file would hold it, chunked as ingest chunks it.

    ``spec`` None: one chunk per document whatever its length; the embedder then truncates
    it at its window, which is how MTEB/BEIR publish their dense baselines.
    """
    out: list[EvalChunk] = []
    chunker = None if spec is None else SentenceChunker(tokenizer, spec)
    for doc in dataset.corpus.values():
        text = f"{doc.title.strip()}\n\n{doc.text.strip()}" if doc.title.strip() else doc.text.strip()
        if chunker is None:
            out.append(EvalChunk(doc.doc_id, 0, doc.title, text, text))
            continue
        prefix = TitlePrefix.of(doc.title, tokenizer, chunker.spec)
        pieces = [c.text for c in chunker.chunk([Section(text)])]
        out.extend(EvalChunk(doc.doc_id, i, doc.title, p, prefix.apply(p)) for i, p in enumerate(pieces))
    return out


def corpus_vectors(
    embedder: Embedder, chunks: Sequence[EvalChunk], mode: SearchMode, progress: Progress, cache_dir: Path | None
) -> Matrix:
    if mode == "sparse":
        # Sparse runs never read the dense vectors: a constant unit vector saves minutes of embedding.
        return np.full((len(chunks), embedder.dimension), 1.0 / math.sqrt(embedder.dimension), dtype=np.float32)
    return embed_all(
        embedder,
        [c.embed or c.text for c in chunks],
        query=False,
        label="corpus",
        progress=progress,
        cache_dir=cache_dir,
    )


def ingest(
    index: QdrantIndex, chunks: Sequence[EvalChunk], vectors: Matrix, progress: Progress, batch: int = 512
) -> None:
    progress.start("index", len(chunks))
    for lo in range(0, len(chunks), batch):
        items = []
        for c, vec in zip(chunks[lo : lo + batch], vectors[lo : lo + batch], strict=True):
            sha = hashlib.sha256(c.text.encode()).hexdigest()
            chunk = Chunk(
                id=chunk_point_id(c.doc_id, sha, c.index),
                doc_id=c.doc_id,
                source=c.doc_id,
                title=c.title,
                chunk_index=c.index,
                text=c.text,
                content_sha256=sha,
                acl_groups=(EVAL_GROUP,),
            )
            items.append(IndexedChunk(chunk=chunk, dense=vec.tolist(), index_text=c.embed or None))
        index.upsert(items)
        progress.advance(len(items))
    index.flush()
    progress.finish()


async def run_queries(
    index: QdrantIndex,
    queries: dict[str, str],
    query_vectors: Matrix | None,
    *,
    mode: SearchMode,
    depth: int,
    progress: Progress,
) -> Run:
    acl = AclFilter.for_groups({EVAL_GROUP})
    run: dict[str, dict[str, float]] = {}
    progress.start(f"search {mode}", len(queries))
    for i, (qid, text) in enumerate(queries.items()):
        dense = None if query_vectors is None else query_vectors[i].tolist()
        # Twice the depth in chunks, so that ``depth`` distinct documents remain after max-pooling.
        hits = await index.search(dense=dense, text=text, acl=acl, limit=2 * depth, mode=mode)
        docs: dict[str, float] = {}
        for h in hits:
            if h.score > docs.get(h.chunk.doc_id, -math.inf):
                docs[h.chunk.doc_id] = h.score
        run[qid] = dict(sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:depth])
        progress.advance()
    progress.finish()
    return run


@contextmanager
def throwaway_index(
    embedder: Embedder, fusion: FusionParams | None, tuning: IndexTuning | None = None
) -> Iterator[QdrantIndex]:
    """An Edge shard in a temporary directory, removed afterwards, whatever happens; built with ``tuning``
    (the settings' index structures), so what it measures is what a collection of those settings returns."""
    with tempfile.TemporaryDirectory(prefix="docquery-eval-") as tmp:
        index = open_edge(
            Path(tmp) / "collections" / "eval",
            name="eval",
            model_id=embedder.model_id,
            dimension=embedder.dimension,
            fusion=fusion,
            tuning=tuning,
        )
        try:
            yield index
        finally:
            index.close()


def run_eval(
    dataset_dir: Path,
    embedder: Embedder,
    config: EvalConfig,
    *,
    fusion: FusionParams | None = None,
    tuning: IndexTuning | None = None,
    progress: Progress | None = None,
) -> EvalResult:
    progress = progress or NullProgress()
    started = time.monotonic()
    dataset = load_beir(dataset_dir, config.split)
    chunks = chunk_corpus(dataset, tokenizer_for(embedder), config.chunks)
    log.info(
        "eval dataset loaded: docs=%d chunks=%d queries=%d split=%s mode=%s",
        len(dataset.corpus), len(chunks), len(dataset.queries), config.split, config.mode,
    )  # fmt: skip
    vectors = corpus_vectors(embedder, chunks, config.mode, progress, config.cache_dir)
    qvecs = None
    if config.mode != "sparse":
        qvecs = embed_all(
            embedder,
            list(dataset.queries.values()),
            query=True,
            label=f"queries-{config.split}",
            progress=progress,
            cache_dir=config.cache_dir,
        )
    with throwaway_index(embedder, fusion, tuning) as index:
        ingest(index, chunks, vectors, progress)
        run = asyncio.run(
            run_queries(index, dataset.queries, qvecs, mode=config.mode, depth=config.depth, progress=progress)
        )
    scores = per_query(run, dataset.qrels)
    return EvalResult(
        metrics=mean_scores(scores),
        mode=config.mode,
        split=config.split,
        n_queries=len(dataset.queries),
        n_docs=len(dataset.corpus),
        n_chunks=len(chunks),
        seconds=time.monotonic() - started,
        per_query=scores,
    )
