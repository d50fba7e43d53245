"""Ranking metrics, written out so they can be checked by hand (tests/unit/test_metrics.py).

Conventions follow trec_eval / pytrec_eval as BEIR uses them:

* nDCG@k uses linear gains (``rel``, not ``2**rel - 1``) and ``log2(rank + 1)``
  discounts; the ideal ranking is built from all judged relevant documents.
* Recall@k is the share of relevant (``rel > 0``) documents found in the top k.
* MRR@k is ``1 / rank`` of the first relevant document in the top k, else 0.
* Scores are averaged over the queries that have at least one relevant document;
  a query with no results scores 0 (it is not dropped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Run = Mapping[str, Mapping[str, float]]  # query id -> doc id -> score
METRIC_KEYS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Doc ids by descending score; ties broken by id so results are reproducible."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def ndcg_at_k(ranking: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    dcg = sum(max(rels.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at_k(ranking: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    for i, d in enumerate(ranking[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def per_query(run: Run, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, float]]:
    """Each metric in ``METRIC_KEYS`` for each judged query (the basis of confidence intervals)."""
    scores: dict[str, dict[str, float]] = {}
    for q, rels in qrels.items():
        if not any(r > 0 for r in rels.values()):
            continue
        ranking = ranked(run.get(q, {}))
        scores[q] = {
            "ndcg@10": ndcg_at_k(ranking, rels, 10),
            "recall@10": recall_at_k(ranking, rels, 10),
            "recall@100": recall_at_k(ranking, rels, 100),
            "mrr@10": mrr_at_k(ranking, rels, 10),
        }
    return scores


def mean_scores(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric in ``METRIC_KEYS`` over ``per_query``'s scores (0 when none is judged)."""
    n = len(scores)
    return {key: (sum(s[key] for s in scores.values()) / n if n else 0.0) for key in METRIC_KEYS}


def evaluate(run: Run, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean of each metric in ``METRIC_KEYS`` over the judged queries."""
    return mean_scores(per_query(run, qrels))
