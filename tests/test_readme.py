"""The README's commands work pasted in order, so the README cannot drift.

The test runs every ```bash block of README.md, in order, in one bash session in a
temp dir holding a copy of examples/: ``make demo`` is replaced by the Makefile's
own demo recipe (so the Makefile is checked too), ``make test`` is skipped, and
blocks marked ``<!-- readme-test: skip (...) -->`` (they need vLLM and a Qdrant
server) are skipped. ``.venv/bin/docquery`` runs this worktree's code; port 8080
and the metrics port become free ones. The synopsis block is checked against the real parsers.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from docquery.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
_BLOCK = re.compile(r"(<!-- readme-test: skip[^>]*-->\n)?```(\w*)\n(.*?)```", re.S)
_MARK = "@@@ readme line "


def bash_blocks() -> list[str]:
    return [body for skip, lang, body in _BLOCK.findall(README) if lang == "bash" and not skip]


def makefile_recipe(target: str) -> list[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    variables = dict(re.findall(r"^(\w+)\s*[:?]?=\s*(.*)$", text, re.M))
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, f"no {target} target in the Makefile"

    def expand(line: str) -> str:
        for _ in range(3):  # variables that name variables
            line = re.sub(r"\$\((\w+)\)", lambda m: variables[m.group(1)], line)
        return line

    return [expand(line.strip()) for line in recipe.group(1).splitlines() if not line.strip().startswith("#")]


def script(port: int) -> tuple[str, list[str]]:
    """The bash script and the commands it runs, one marker echoed before each."""
    commands: list[str] = []
    for block in bash_blocks():
        logical = re.sub(r"\\\n\s*", " ", block)  # join continuation lines
        for raw in logical.splitlines():
            line = re.sub(r"\s+#\s.*$", "", raw).strip()  # trailing comments
            if not line or line.startswith("#") or line == "make test" or line.startswith("make test "):
                continue
            if line.startswith("make demo"):
                commands.extend(makefile_recipe("demo"))
                continue
            assert not line.startswith("make "), f"README names a make target the test does not know: {line}"
            commands.append(line.replace("8080", str(port)))
    body = "\n".join(f"echo '{_MARK}{i}'\n{cmd}" for i, cmd in enumerate(commands))
    return "set -euo pipefail\n" + body + "\n", commands


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readme_keeps_its_two_commands() -> None:
    assert "make demo" in README and "make test" in README
    cmds = script(8080)[1]
    assert any("docquery ingest examples" in c for c in cmds), "the demo's ingest is not run"
    assert sum("docquery ask" in c for c in cmds) >= 4 and any("docquery serve" in c for c in cmds)


def test_the_synopsis_names_real_commands_and_flags() -> None:
    synopsis = next(body for _, lang, body in _BLOCK.findall(README) if not lang and "docquery ingest" in body)
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "ask" in a.choices).choices
    assert isinstance(subparsers, dict)
    for line in re.sub(r"\n\s+\[", " [", synopsis).splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "docquery":
            continue
        cmd = subparsers[words[1]]
        groups = [a.choices for a in cmd._actions if isinstance(a.choices, dict)]
        if groups:  # a command of subcommands (eval retrieval, config show): the one named
            cmd = groups[0][words[2]]
        known = {opt for action in cmd._actions for opt in action.option_strings}
        for flag in re.findall(r"(--[a-z][a-z-]*)", line):
            assert flag in known, f"README synopsis: docquery {words[1]} has no {flag}"


@pytest.mark.slow
def test_readme_commands_work_pasted_in_order(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    shim = tmp_path / ".venv" / "bin" / "docquery"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m docquery.cli "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", DOCQUERY_EMBEDDER__TUNE_MALLOC="false")
    env.update(DOCQUERY_METRICS_PORT=str(_free_port()))  # a running `docquery serve` may hold 9464
    text, commands = script(_free_port())
    got = subprocess.run(
        ["bash", "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert got.returncode == 0, f"a README line failed:\n{got.stdout[-3000:]}\n{got.stderr[-3000:]}"
    outputs = dict.fromkeys(commands, "")
    for part in got.stdout.split(_MARK)[1:]:
        number, _, out = part.partition("\n")
        outputs[commands[int(number)]] = out
    asks = [c for c in commands if "docquery ask" in c]
    staff = next(outputs[c] for c in asks if "--as-groups staff" in c)
    security = next(outputs[c] for c in asks if "--as-groups security" in c)
    nobody = next(outputs[c] for c in asks if "--as-groups" not in c and "--api-key-file" not in c)
    served = next(outputs[c] for c in asks if "--api-key-file" in c)  # through the running serve, the key's groups
    assert "[S1]" in staff and "expense" in staff.lower()
    assert "[S1]" in served and "expense" in served.lower()
    assert "handbook" not in security.lower() and "No citations." in nobody
    curl = next(outputs[c] for c in commands if "/v1/query" in c)
    assert '"citations":[{' in curl.replace(" ", ""), curl
    assert "Traceback" not in got.stderr
