"""Docs/settings.md is generated from the settings model, and every setting is in it and described."""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery.cli import main
from docquery.commands.config import reference_markdown
from docquery.config.settings import setting_fields

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "settings.md"
REGENERATE = "regenerate it: .venv/bin/docquery config reference > docs/settings.md"


def test_docs_settings_md_is_the_generated_reference() -> None:
    assert DOC.read_text(encoding="utf-8") == reference_markdown(), REGENERATE


@pytest.mark.parametrize(("path", "env"), [(p, e) for p, e, _ in setting_fields()])
def test_every_setting_appears_with_a_description(path: str, env: str) -> None:
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `{env}` |")]
    assert len(rows) == 1, f"{env} is not in docs/settings.md; {REGENERATE}"
    description = rows[0].rstrip(" |").rsplit(" | ", 1)[-1]
    assert len(description) > 10, f"{path} has no docstring in docquery/config/settings.py"


def test_the_cli_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "reference"]) == 0
    assert capsys.readouterr().out == reference_markdown()


def test_contract_links_the_reference() -> None:
    contract = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    assert "(settings.md)" in contract


def test_an_oversized_file_is_described_as_the_failure_ingest_reports() -> None:
    # docs/contract.md and docs/ingestion.md: too large is a failure (exit 1), not a skip (exit 0).
    description = next(f.description or "" for p, _, f in setting_fields() if p == "ingest.max_file_bytes")
    assert "failed" in description and "exits 1" in description
    assert "skipped" not in description
