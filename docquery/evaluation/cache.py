"""On-disk cache of embeddings (``.npy``), keyed by model, dimension and the exact texts.

Embedding SciFact's 5,183 documents takes minutes on two CPU cores; tuning on
the train split re-runs the evaluation many times over the same texts.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from docquery.core.ports import Embedder
from docquery.evaluation.progress import Progress

Matrix = npt.NDArray[np.float32]


def cache_key(model_id: str, dimension: int, texts: Sequence[str], *, query: bool) -> str:
    h = hashlib.sha256(f"{model_id}\x1f{dimension}\x1f{int(query)}".encode())
    for t in texts:
        h.update(b"\x1e")
        h.update(t.encode("utf-8"))
    return h.hexdigest()[:24]


def embed_all(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    query: bool,
    label: str,
    progress: Progress,
    cache_dir: Path | None = None,
    batch: int = 256,
) -> Matrix:
    path = None
    if cache_dir is not None:
        # Precision is part of the key so an evaluation of bfloat16 never reads float32 vectors.
        variant = f"{embedder.model_id}@{getattr(embedder, 'precision', '')}"
        path = cache_dir / f"{label}-{cache_key(variant, embedder.dimension, texts, query=query)}.npy"
        if path.is_file():
            cached: Matrix = np.load(path)
            if cached.shape == (len(texts), embedder.dimension):
                return cached
    out = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    # Longest first, in length order: batches of similar length waste less padding.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    progress.start(f"embed {label}", len(texts))
    for lo in range(0, len(order), batch):
        idx = order[lo : lo + batch]
        out[idx] = np.asarray(embedder.embed([texts[i] for i in idx], query=query), dtype=np.float32)
        progress.advance(len(idx))
    progress.finish()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
        np.save(tmp, out)
        tmp.replace(path)  # atomic: a concurrent run never reads half a file
    return out
