"""The core contract in pyproject.toml names every other part of docquery, so a new module is covered.

The contracts themselves run as `lint-imports` in `make test`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORE = {"docquery.core"}


def _contracts() -> dict[str, dict[str, list[str]]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def _top_level_modules() -> set[str]:
    names = set()
    for entry in (REPO / "docquery").iterdir():
        if entry.suffix == ".py" and entry.stem != "__init__":
            names.add(f"docquery.{entry.stem}")
        elif entry.is_dir() and (entry / "__init__.py").exists():
            names.add(f"docquery.{entry.name}")
    return names


def test_the_core_contract_forbids_every_other_module() -> None:
    [core] = [c for c in _contracts().values() if set(c.get("source_modules", ())) == CORE]
    assert set(core["forbidden_modules"]) == (_top_level_modules() - CORE) | {"ingest"}


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
