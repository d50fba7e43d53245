"""How many candidates a dense search rescores: the ranked results always, a deeper list's tail never."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docquery.core.collection import DENSE_VECTOR, SPARSE_VECTOR
from docquery.index.engine import Nearest, RankFusion, Search, Sparse, Where
from docquery.index.tuning import IndexTuning

WHERE = Where(must=())
DENSE = Nearest(DENSE_VECTOR, [0.1, 0.2])
SPARSE = Nearest(SPARSE_VECTOR, Sparse([1], [1.0]))


@given(
    oversampling=st.floats(min_value=1.0, max_value=16.0),
    wanted=st.integers(min_value=1, max_value=1000),
    extra=st.integers(min_value=0, max_value=1000),
)
def test_the_ranked_results_are_always_oversampled_and_nothing_past_the_depth_is(
    oversampling: float, wanted: int, extra: int
) -> None:
    depth = wanted + extra
    factor = IndexTuning(oversampling=oversampling).rescoring(depth=depth, wanted=wanted)
    assert 1.0 <= factor <= oversampling
    # The candidates rescored cover the ranked results oversampled in full (float rounding aside) ...
    assert depth * factor >= wanted * oversampling * (1 - 1e-12)
    # ... and are no more than that or the depth, whichever is larger.
    assert depth * factor <= max(depth, wanted * oversampling) * (1 + 1e-12)
    if extra == 0:
        assert factor == oversampling


@pytest.mark.parametrize(
    ("search", "depth"),
    [
        (Search(WHERE, 10, nearest=DENSE), (10, 10)),
        (Search(WHERE, 100, nearest=DENSE, ranked=10), (100, 10)),
        (Search(WHERE, 10, prefetch=(DENSE, SPARSE), prefetch_limit=100, fusion=RankFusion("dbsf")), (100, 10)),
        (Search(WHERE, 40, prefetch=(DENSE, SPARSE), prefetch_limit=40, fusion=RankFusion("rrf")), (40, 40)),
    ],
)
def test_a_search_says_how_deep_its_dense_branch_goes_and_how_much_of_it_is_ranked(
    search: Search, depth: tuple[int, int]
) -> None:
    assert search.dense_depth() == depth


def test_the_service_hybrid_query_rescores_its_prefetch_once() -> None:
    # limit 10, prefetch 100, oversampling 2: 100 candidates a segment, where it was 200.
    assert IndexTuning().rescoring(depth=100, wanted=10) == 1.0
    assert IndexTuning().rescoring(depth=10, wanted=10) == 2.0
