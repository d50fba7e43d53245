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


def evaluate(run: Run, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean of each metric in ``METRIC_KEYS`` over the judged queries."""
    judged = [q for q, rels in qrels.items() if any(r > 0 for r in rels.values())]
    totals = dict.fromkeys(METRIC_KEYS, 0.0)
    for q in judged:
        ranking = ranked(run.get(q, {}))
        rels = qrels[q]
        totals["ndcg@10"] += ndcg_at_k(ranking, rels, 10)
        totals["recall@10"] += recall_at_k(ranking, rels, 10)
        totals["recall@100"] += recall_at_k(ranking, rels, 100)
        totals["mrr@10"] += mrr_at_k(ranking, rels, 10)
    n = len(judged)
    return {key: (value / n if n else 0.0) for key, value in totals.items()}
