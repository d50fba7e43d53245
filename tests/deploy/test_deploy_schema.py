"""Strict schema validation against Kubernetes 1.37 (kubernetes-validate).

CRDs without a schema there (deploy_support.CRD_KINDS) are the only warnings
allowed; their structure is checked in test_deploy_render.py, by the checkov
rules (which read LeaderWorkerSet pod templates), and for the HTTPRoute against
the Gateway API's standard-channel schema in test_deploy_routes.py.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import deploy_support as ds
from deploy_support import Rendering


def test_rendered_manifests_validate_strictly(kvalidate_bin: Path, renderings: dict[str, Rendering]) -> None:
    files = [str(r.path) for r in renderings.values()]
    proc = subprocess.run(
        [str(kvalidate_bin), "-k", f"{ds.K8S_VERSION}.0", "--strict", "--quiet", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    out = proc.stdout + proc.stderr
    unexpected = []
    for line in out.splitlines():
        if not line.strip():
            continue
        m = re.search(r"Couldn't find schema for kind (\w+) with api version", line)
        if line.startswith("WARN") and m and m.group(1) in ds.CRD_KINDS:
            continue
        unexpected.append(line)
    assert proc.returncode == 0 and not unexpected, "\n".join(unexpected) or out


def test_validator_rejects_an_unknown_field(kvalidate_bin: Path, workdir: Path) -> None:
    """Guards the guard: strict mode must fail on a misspelt field."""
    bad = workdir / "typo.yaml"
    bad.write_text("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\nautomountServiceAcountToken: false\n")
    proc = subprocess.run(
        [str(kvalidate_bin), "-k", f"{ds.K8S_VERSION}.0", "--strict", "--quiet", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0


def test_crd_kinds_are_the_only_unvalidated_ones(renderings: dict[str, Rendering]) -> None:
    kinds = {d["kind"] for r in renderings.values() for d in r.docs}
    assert kinds & ds.CRD_KINDS == ds.CRD_KINDS  # both are rendered somewhere, hence tested
