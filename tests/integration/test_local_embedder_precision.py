"""The bundled model in bfloat16 autocast gives the vectors float32 gives, so precision is a speed knob."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from docquery.embedders import local as le
from docquery.embedders.local import LocalEmbedder, resolve_precision

DOCS = [
    "Vitamin D deficiency is associated with an increased risk of respiratory infections.",
    "The mitochondrial electron transport chain generates most of the cell's ATP.",
    "Quarterly revenue rose 12 percent, driven by subscriptions in the European market.",
    "Kubernetes NetworkPolicies select pods by label and default to allowing all traffic.",
    "Beta blockers lower heart rate and blood pressure by blocking adrenaline receptors.",
    "A long chunk " + "with many repeated words about immunology and T cell activation " * 20,
]
QUERIES = ["which vitamin protects against lung infections", "how do cells make energy", "pod firewall rules"]


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def both(local_embedder: LocalEmbedder) -> Iterator[tuple[LocalEmbedder, LocalEmbedder]]:
    """(float32, bfloat16): the session embedder is one of them, one more model load makes the other."""
    other = "float32" if local_embedder.precision == "bfloat16" else "bfloat16"
    second = LocalEmbedder(precision=other)
    yield (second, local_embedder) if other == "float32" else (local_embedder, second)


def test_bfloat16_vectors_match_float32(both: tuple[LocalEmbedder, LocalEmbedder]) -> None:
    fp32, bf16 = both
    assert (fp32.precision, bf16.precision) == ("float32", "bfloat16")
    texts = DOCS + QUERIES
    for a, b in zip(fp32.embed(texts), bf16.embed(texts), strict=True):
        assert _cos(a, b) >= 0.9999
        assert math.isclose(math.sqrt(sum(x * x for x in b)), 1.0, abs_tol=1e-4)  # still normalised


def test_bfloat16_ranks_documents_as_float32_does(both: tuple[LocalEmbedder, LocalEmbedder]) -> None:
    def ranking(emb: LocalEmbedder) -> list[list[int]]:
        docs = emb.embed(DOCS)
        return [sorted(range(len(DOCS)), key=lambda i: -_cos(q, docs[i])) for q in emb.embed(QUERIES, query=True)]

    fp32, bf16 = both
    assert ranking(bf16) == ranking(fp32)
    assert [r[0] for r in ranking(fp32)] == [0, 1, 3]  # and the ranking is the sensible one


def test_auto_uses_bfloat16_only_with_native_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(le, "native_bfloat16", lambda: False)
    assert resolve_precision("auto") == "float32"  # emulated bfloat16 would be slower, not faster
    assert resolve_precision("bfloat16") == "bfloat16"  # an explicit choice is honoured
    monkeypatch.setattr(le, "native_bfloat16", lambda: True)
    assert resolve_precision("auto") == "bfloat16"
    assert resolve_precision("float32") == "float32"
    assert resolve_precision("auto", device="cuda") == "float32"  # CPU autocast only


def test_a_torch_without_the_cpu_probes_means_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert le.native_bfloat16() is False
    assert resolve_precision("auto") == "float32"
