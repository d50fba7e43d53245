"""The bundled model's worker threads: the same vectors in the same order, really in parallel, one
torch thread each, and a failure in a worker is the embedder's clean error."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from docquery.core.errors import EmbedderError
from docquery.embedders.local import LocalEmbedder, resolve_workers, usable_cpus
from tests.support.ingest_fixtures import SCIFACT


def _texts(n: int) -> list[str]:
    """Texts of very different lengths, so the longest-first passes reorder them."""
    base = [
        "Vitamin D deficiency is associated with respiratory infections.",
        "The mitochondrial electron transport chain generates most of the cell's ATP. " * 6,
        "Kubernetes NetworkPolicies select pods by label.",
        "Beta blockers lower heart rate and blood pressure by blocking adrenaline receptors. " * 3,
    ]
    return [f"{i}: {base[i % len(base)]}" * (1 + i % 3) for i in range(n)]


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture
def embedder(local_embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> LocalEmbedder:
    monkeypatch.setattr(local_embedder, "workers", 2)  # whatever this machine's core count
    return local_embedder


def test_workers_give_the_single_thread_vectors_in_order(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _texts(3 * 32 + 5)  # four passes, the last one short
    parallel = embedder.embed(texts)
    monkeypatch.setattr(embedder, "workers", 1)
    single = embedder.embed(texts)
    assert len(parallel) == len(texts)
    for i, (a, b) in enumerate(zip(parallel, single, strict=True)):
        assert _cos(a, b) >= 0.9999, i
        # In order: no other text's vector is closer (the texts are all different).
        assert max(range(len(single)), key=lambda j: _cos(a, single[j])) == i


def test_passes_run_on_the_workers_with_one_torch_thread_each(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    seen: list[tuple[str, int]] = []
    both_inside = threading.Barrier(2, timeout=20)
    encode = embedder._encode

    def recording(texts: list[str]) -> list[list[float]]:
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        if len(seen) <= 2:
            both_inside.wait()  # the first two passes are in flight at the same time
        return encode(texts)

    monkeypatch.setattr(embedder, "_encode", recording)
    caller_threads = torch.get_num_threads()
    assert len(embedder.embed(_texts(4 * 32))) == 128
    assert len({name for name, _ in seen}) == 2 and all(name.startswith("embed") for name, _ in seen)
    assert {n for _, n in seen} == {1}
    assert torch.get_num_threads() == caller_threads  # the caller's torch threads are untouched


@pytest.mark.parametrize("n", [2, 8, 33])
def test_a_small_bulk_call_is_shared_by_the_workers(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """An upload's calls are small (so a question waits little for one): both workers still take part."""
    seen: list[tuple[str, int]] = []
    encode = embedder._encode

    def recording(texts: list[str]) -> list[list[float]]:
        seen.append((threading.current_thread().name, len(texts)))
        return encode(texts)

    monkeypatch.setattr(embedder, "_encode", recording)
    assert len(embedder.embed(_texts(n))) == n
    assert len(seen) >= 2 and sum(size for _, size in seen) == n
    assert max(size for _, size in seen) <= -(-n // 2)  # halves, not one pass and a straggler
    assert all(name.startswith("embed") for name, _ in seen)


def test_questions_run_with_one_torch_thread_on_the_callers_side(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import torch

    seen: list[tuple[str, int]] = []
    encode = embedder._encode

    def recording(texts: list[str]) -> list[list[float]]:
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return encode(texts)

    monkeypatch.setattr(embedder, "_encode", recording)
    vectors = asyncio.run(embedder.aembed(["Which beta blockers lower heart rate?"], query=True))
    assert len(vectors) == 1
    [(name, threads)] = seen
    assert threads == 1 and not name.startswith("embed")  # one pass, not split over the workers


def test_a_failing_pass_is_a_clean_error_and_the_embedder_goes_on(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    encode = embedder._encode
    calls: list[int] = []

    def failing(texts: list[str]) -> Any:
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("secret document text must not appear")
        return encode(texts)

    monkeypatch.setattr(embedder, "_encode", failing)
    with pytest.raises(EmbedderError) as info:
        embedder.embed(_texts(6 * 32))
    assert "secret" not in str(info.value)
    # The other worker stopped after its pass, before the call raised: nothing runs on.
    stopped_at = len(calls)
    assert stopped_at < 6
    embedder.close()  # joins the worker threads: a pass still running would have counted by now
    assert len(calls) == stopped_at
    assert len(embedder.embed(_texts(3 * 32))) == 96


def test_worker_count(tmp_path: Path) -> None:
    assert resolve_workers(0, device="cuda") == 1  # one stream on a GPU
    assert resolve_workers(3) == 3
    assert 1 <= resolve_workers(0) <= 4
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    for content, expected in [
        ("max 100000\n", affinity),  # no quota
        ("100000 100000\n", 1),  # a 1-CPU limit
        ("150000 100000\n", min(affinity, 2)),  # 1.5 CPUs: two workers share the time
        ("garbage\n", affinity),
    ]:
        cpu_max.write_text(content, encoding="ascii")
        assert usable_cpus(cpu_max) == expected, content
    assert usable_cpus(tmp_path / "missing") == affinity


def test_workers_match_on_real_abstracts(embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    with SCIFACT.open(encoding="utf-8") as fh:
        texts = [json.loads(line)["text"][:1500] for line, _ in zip(fh, range(80), strict=False)]
    parallel = embedder.embed(texts)
    monkeypatch.setattr(embedder, "workers", 1)
    assert min(_cos(a, b) for a, b in zip(parallel, embedder.embed(texts), strict=True)) >= 0.9999


def test_passes_are_bounded_in_padded_tokens_and_in_texts(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from docquery.embedders.local import MAX_TOKENS, PASS_TOKENS

    passes: list[list[str]] = []
    encode = embedder._encode

    def recording(texts: list[str]) -> list[list[float]]:
        passes.append(texts)
        return encode(texts)

    monkeypatch.setattr(embedder, "_encode", recording)
    long_texts = [f"{i} " + "The planner estimates the cost of each plan node. " * 40 for i in range(40)]
    short_texts = [f"{i}: VACUUM reclaims storage." for i in range(70)]
    vectors = embedder.embed(long_texts + short_texts)
    assert len(vectors) == 110 and all(vectors)
    tokenizer = embedder.tokenizer
    for texts in passes:
        widest = max(len(tokenizer(t, truncation=True, max_length=MAX_TOKENS)["input_ids"]) for t in texts)
        assert len(texts) <= 32 and len(texts) * widest <= PASS_TOKENS
    sizes = sorted(len(t) for t in passes)
    assert sizes.count(PASS_TOKENS // MAX_TOKENS) >= 2  # the long texts: a full window each, so fewer a pass
    assert 32 in sizes  # short texts still fill a pass of batch_size


def test_a_call_of_many_passes_gives_back_what_they_kept(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docquery.embedders.local

    calls: list[int] = []

    def give_back() -> bool:
        calls.append(1)
        return True

    monkeypatch.setattr(docquery.embedders.local, "give_back_kept_memory", give_back)
    embedder.embed(["one question"])
    embedder.embed(_texts(10))
    assert calls == []  # one pass: nothing kept between passes to give back
    embedder.embed(_texts(70))
    assert calls == [1]
    monkeypatch.setattr(embedder, "workers", 1)
    embedder.embed(_texts(70))
    assert calls == [1, 1]
