"""What a citation's ``score`` means is documented for every retrieval mode and fusion, and in the schema."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from docquery.core.domain import Citation
from docquery.core.ports import SearchMode
from docquery.index.fusion import FusionMethod

API_MD = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
TABLE = API_MD.split("| mode / fusion | `score` | range |", 1)[-1].split("\n\n", 1)[0]


@pytest.mark.parametrize("name", [*get_args(SearchMode), *get_args(FusionMethod)])
def test_every_mode_and_fusion_has_a_row(name: str) -> None:
    assert f"`{name}`" in TABLE


def test_the_schema_says_what_score_is_comparable_with() -> None:
    description = Citation.model_json_schema()["properties"]["score"]["description"]
    assert "same answer" in description and "docs/api.md" in description
    assert "compare scores within one answer" in API_MD
