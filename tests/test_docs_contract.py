"""docs/contract.md is written to its users, and its synopsis names only flags the parsers have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRACT = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("phrase", ["closing note", "You may extend", "do not rename them", "Changed from"])
def test_written_to_users_not_to_implementers(phrase: str) -> None:
    assert phrase.lower() not in CONTRACT.lower()


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
