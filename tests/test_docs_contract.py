"""#19.10: docs/contract.md is written to its users and keeps the agreed names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRACT = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
SHARED = Path("/work/shared/docs/CONTRACT.md")


@pytest.mark.parametrize("phrase", ["closing note", "You may extend", "do not rename them", "Changed from"])
def test_written_to_users_not_to_implementers(phrase: str) -> None:
    assert phrase.lower() not in CONTRACT.lower()


def _implemented(name: str) -> bool:
    """The name is in the code as a string literal (a flag, a route) or a field: then the contract must name it."""
    needle = re.escape(name.rsplit(maxsplit=1)[-1] if name.startswith(("GET ", "POST ", "DELETE ")) else name)
    pattern = re.compile(rf"[\"']{needle}[\"']|^\s+{needle}\s*:", re.M)
    sources = [*REPO.glob("docquery/**/*.py"), *REPO.glob("ingest/**/*.py")]
    return any(pattern.search(p.read_text(encoding="utf-8")) for p in sources)


def test_every_agreed_name_that_exists_is_in_the_contract() -> None:
    if not SHARED.exists():
        pytest.fail(f"{SHARED} (the agreed contract) is missing")
    names = set(re.findall(r"`([^`\n]+)`", SHARED.read_text(encoding="utf-8")))
    missing = sorted(n for n in names if n not in CONTRACT and _implemented(n))
    assert not missing, f"docs/contract.md lost agreed names: {missing}"


def test_cli_synopsis_matches_the_parsers() -> None:
    from docquery.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "ask" in a.choices).choices
    assert isinstance(sub, dict)
    synopsis = CONTRACT.split("```", 2)[1]
    for line in re.sub(r"\n\s+\[", " [", synopsis).splitlines():
        words = line.split()
        if len(words) > 1 and words[0] == "docquery":
            cmd = sub[words[1]]
            groups = [a.choices for a in cmd._actions if isinstance(a.choices, dict)]
            if groups:  # a command of subcommands (eval retrieval, config show): the one named
                cmd = groups[0][words[2]]
            known = {o for a in cmd._actions for o in a.option_strings}
            assert set(re.findall(r"--[a-z][a-z-]*", line)) <= known, line
