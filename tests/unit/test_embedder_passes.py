"""What one forward pass of the bundled model may hold, without loading it: a stand-in tokenizer whose
token count is the text's length, so generated calls cover every mix of lengths."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.embedders.local import MAX_TOKENS, PASS_TOKENS, LocalEmbedder, QuestionsFirst


class _Model:
    @staticmethod
    def tokenizer(texts: Sequence[str], *, truncation: bool, max_length: int) -> dict[str, list[list[int]]]:
        assert truncation
        return {"input_ids": [[0] * min(len(t), max_length) for t in texts]}


def _embedder(*, batch_size: int = 32, workers: int = 1) -> Any:
    """A LocalEmbedder over the stand-in, its passes recorded instead of run."""
    embedder: Any = LocalEmbedder.__new__(LocalEmbedder)
    embedder._model, embedder._batch_size, embedder.workers = _Model(), batch_size, workers
    embedder._lock, embedder._pool, embedder.precision = QuestionsFirst(), None, "float32"
    embedder.seen = []

    def encode(texts: list[str]) -> list[list[float]]:
        embedder.seen.append((texts, threading.current_thread()))
        return [[float(len(t))] for t in texts]

    embedder._encode = encode
    return embedder


lengths = st.lists(st.integers(min_value=1, max_value=2 * MAX_TOKENS), min_size=1, max_size=300)


@settings(max_examples=200, deadline=None)
@given(lengths=lengths, batch_size=st.integers(min_value=1, max_value=64), workers=st.sampled_from([1, 2]))
def test_a_bulk_call_runs_in_passes_of_bounded_texts_and_padded_tokens(
    lengths: list[int], batch_size: int, workers: int
) -> None:
    texts = [f"{i:03d}" + "x" * n for i, n in enumerate(lengths)]
    embedder = _embedder(batch_size=batch_size, workers=workers)
    try:
        vectors = embedder.embed(texts)
    finally:
        embedder.close()
    assert vectors == [[float(len(t))] for t in texts]  # each text once, its vector at its place
    for texts_of_pass, thread in embedder.seen:
        widest = max(min(len(t), MAX_TOKENS) for t in texts_of_pass)
        assert len(texts_of_pass) <= batch_size
        assert len(texts_of_pass) * widest <= PASS_TOKENS or len(texts_of_pass) == 1
        # One worker, or a single text, stays on the caller's thread; any other call is shared by the workers.
        assert (thread is threading.main_thread()) == (workers == 1 or len(texts) == 1)
    if workers > 1 and len(texts) > 1:
        assert len(embedder.seen) >= 2  # a small call too: each worker gets a pass
