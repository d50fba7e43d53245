"""The contracts that must stay in pyproject.toml: removing one would make `lint-imports` pass vacuously.

The contracts themselves run as `lint-imports` in `make test`; the layering's `exhaustive = true` makes
import-linter itself refuse a folder of docquery that has no layer.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _contracts() -> dict[str, dict[str, list[str]]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def test_docquerys_folders_are_one_exhaustive_layering() -> None:
    [layers] = [c for c in _contracts().values() if c["type"] == "layers" and c.get("containers") == ["docquery"]]
    assert layers["exhaustive"] is True and "ignore_imports" not in layers
    assert layers["layers"][0] == "cli" and layers["layers"][-1] == "core"


def test_one_way_imports_and_the_vendor_free_rag_are_contracts() -> None:
    forbidden = {
        (tuple(c["source_modules"]), tuple(c["forbidden_modules"]))
        for c in _contracts().values()
        if c["type"] == "forbidden"
    }
    assert (("docquery",), ("ingest",)) in forbidden
    [rag] = [f for s, f in forbidden if s == ("docquery.rag",)]
    assert {"qdrant_client", "qdrant_edge", "aiohttp", "httpx", "hvac", "torch", "sentence_transformers"} <= set(rag)


def test_the_folders_of_both_packages_import_each_other_one_way() -> None:
    [acyclic] = [c for c in _contracts().values() if c["type"] == "acyclic_siblings"]
    assert set(acyclic["ancestors"]) == {"docquery", "ingest"}
    assert "ignore_imports" not in acyclic
