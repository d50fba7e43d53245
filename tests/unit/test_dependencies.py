"""Every runtime dependency is imported by the packages, every third-party import is declared,
and the hash-locked sets pin exactly what pyproject.toml declares."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("docquery", "ingest")

# Declared but imported in another way: each says why.
NOT_IMPORTED_BY_NAME = {
    "lxml": ("ingest/prepare/loaders/html.py", '"lxml"'),  # BeautifulSoup's parser, named as a string
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    assert match, req
    return _norm(match.group(1))


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def declared_runtime() -> dict[str, str]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    return {_requirement_name(r): r for r in project["dependencies"]}


def imported_modules() -> dict[str, set[str]]:
    """Top-level third-party modules imported anywhere in the packages (lazy imports included)."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in (*PACKAGES, "__future__"):
                        found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


@cache
def _distributions() -> dict[str, list[str]]:
    return dict(packages_distributions())


def _distribution_of(module: str) -> str:
    dists = _distributions().get(module)
    assert dists, f"{module} is imported but no installed distribution provides it"
    return _norm(dists[0])


def test_every_imported_module_is_declared() -> None:
    declared = declared_runtime()
    undeclared = {
        module: sorted(paths)
        for module, paths in imported_modules().items()
        if _distribution_of(module) not in declared
    }
    assert undeclared == {}, f"imported but not in [project] dependencies: {undeclared}"


def test_every_declared_dependency_is_imported() -> None:
    imported = {_distribution_of(module) for module in imported_modules()}
    unused = sorted(set(declared_runtime()) - imported - set(NOT_IMPORTED_BY_NAME))
    assert unused == [], f"declared but never imported: {unused}"
    for dist, where in NOT_IMPORTED_BY_NAME.items():
        if where is not None:
            path, marker = where
            assert marker in (REPO / path).read_text(encoding="utf-8"), f"{dist}: {path} no longer uses it"


def _lock(name: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    text = (REPO / "requirements" / name).read_text(encoding="utf-8")
    for block in re.split(r"\n(?=\S)", text):
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._\-\[\]]*)==(\S+)", block)
        if match:
            assert "--hash=sha256:" in block, f"{name}: {match.group(1)} has no hash"
            pins[_norm(re.sub(r"\[.*\]", "", match.group(1)))] = match.group(2)
    return pins


def test_locks_pin_the_declared_versions_with_hashes() -> None:
    runtime, dev = _lock("runtime.txt"), _lock("dev.txt")
    for name, requirement in declared_runtime().items():
        version = requirement.split("==", 1)[1]
        assert runtime[name].split("+")[0] == version, name
    assert runtime["torch"] == "2.13.0+cpu"  # the CPU build, never the CUDA one
    assert {k: dev[k] for k in runtime} == runtime, "dev.txt must contain runtime.txt exactly"
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    for requirement in project["optional-dependencies"]["dev"]:
        name = _requirement_name(requirement)
        assert dev[name] == requirement.split("==", 1)[1], name


def test_every_declared_requirement_is_an_exact_pin() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        assert re.fullmatch(r"[A-Za-z0-9._-]+(\[[a-z,]+\])?==[0-9][A-Za-z0-9.+]*", requirement), requirement
