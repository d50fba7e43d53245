"""The exit codes have one home, and docs/contract.md lists exactly them."""

from __future__ import annotations

import re
from pathlib import Path

from docquery.core.exits import ExitCode

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "contract.md"
ROW = re.compile(r"^\| (\d+) \| `([A-Z_]+)` \| .+ \|$")


def _documented() -> dict[str, int]:
    text = CONTRACT.read_text(encoding="utf-8")
    section = text.split("### Exit codes", 1)[1].split("\n### ", 1)[0]
    return {m[2]: int(m[1]) for line in section.splitlines() if (m := ROW.match(line))}


def test_the_contract_lists_every_exit_code_and_no_other() -> None:
    assert _documented() == {code.name: code.value for code in ExitCode}


def test_no_module_defines_its_own_exit_constants() -> None:
    root = CONTRACT.parents[1]
    offenders = [
        str(path.relative_to(root))
        for package in ("docquery", "ingest")
        for path in (root / package).rglob("*.py")
        if re.search(r"^EXIT_[A-Z_]+\s*[:=]", path.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert offenders == []
