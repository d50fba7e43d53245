"""User-namespaced pods never land on a node whose kubelet cannot map them.

A kubelet starts a pod with ``hostUsers: false`` only with maxPods x 65,536
subordinate IDs (facts/kubelet-userns.yaml); a rootless kubelet owns one range.
The README names the node label that marks rootless nodes; every userns pod must
require nodes without it, and the README's rootless claims must match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
import yaml
from deploy_support import Rendering

FACTS = yaml.safe_load((Path(__file__).parent / "facts" / "kubelet-userns.yaml").read_text())
README = (ds.K8S / "README.md").read_text()
ROOTLESS_LABEL = "docquery.io/rootless-kubelet"


def kubelet_can_map(kubelet_ids: int, max_pods: int) -> bool:
    per_pod = int(FACTS["ids_per_pod"])
    return kubelet_ids >= max_pods * per_pod and kubelet_ids % per_pod == 0


def _expr(e: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = e["key"], e["operator"], e.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if key not in labels:
            return False
        have, want = int(labels[key]), int(values[0])
        return have > want if op == "Gt" else have < want
    raise AssertionError(f"unknown node selector operator {op}")


def schedulable(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """kube-scheduler's NodeAffinity filter: nodeSelector AND any one required term."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    return any(
        all(_expr(e, labels) for e in term.get("matchExpressions") or [])
        for term in required.get("nodeSelectorTerms") or []
    )


# Node pools an operator may run, as the README asks them to be labelled.
NODES = [
    ({"kubernetes.io/os": "linux"}, 110 * 65536, 110),  # rootful kubelet, subids for its maxPods
    ({"kubernetes.io/os": "linux"}, 250 * 65536, 250),
    ({"kubernetes.io/os": "linux", ROOTLESS_LABEL: "true"}, FACTS["rootless_kubelet_ids"], 110),
    ({"kubernetes.io/os": "linux", ROOTLESS_LABEL: "true"}, FACTS["rootless_kubelet_ids"], 8),
]


def _userns_pods(r: Rendering) -> list[ds.Workload]:
    return [w for w in ds.workloads(r.docs) if w.pod.spec.get("hostUsers") is False]


@pytest.mark.parametrize("name", sorted(ds.combos()))
def test_no_userns_pod_schedules_where_the_kubelet_cannot_map_it(renderings: dict[str, Rendering], name: str) -> None:
    bad = [
        f"{w.name} on {labels}"
        for w in _userns_pods(renderings[name])
        for labels, ids, max_pods in NODES
        if schedulable(w.pod.spec, labels) and not kubelet_can_map(ids, max_pods)
    ]
    assert not bad, f"{name}: user-namespaced pods could land on rootless kubelets: {bad}"


def test_userns_pods_still_have_somewhere_to_run(renderings: dict[str, Rendering]) -> None:
    pods = _userns_pods(renderings["overlay-prod"])
    names = {"docquery-query", "docquery-upload", "docquery-qdrant", "docquery-ingest", "docquery-models-load"}
    assert {w.name for w in pods} == names
    for w in pods:
        assert any(schedulable(w.pod.spec, labels) and kubelet_can_map(ids, m) for labels, ids, m in NODES), w.name


def test_without_the_affinity_the_check_fails(renderings: dict[str, Rendering]) -> None:
    w = _userns_pods(renderings["overlay-prod"])[0]
    spec = {k: v for k, v in w.pod.spec.items() if k != "affinity"}
    assert any(schedulable(spec, labels) and not kubelet_can_map(ids, m) for labels, ids, m in NODES)


@pytest.mark.parametrize(
    ("ids", "max_pods", "ok"),
    [(65536, 1, True), (65536, 110, False), (110 * 65536, 110, True), (110 * 65536 + 1, 110, False), (0, 1, False)],
)
def test_kubelet_rule_from_the_facts(ids: int, max_pods: int, ok: bool) -> None:
    assert kubelet_can_map(ids, max_pods) is ok


def test_readme_rootless_claims_match_the_manifests(renderings: dict[str, Rendering]) -> None:
    needs = README.split("## What the cluster needs", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in needs.splitlines() if line.startswith("| Rootless kubelet"))
    assert f"`{ROOTLESS_LABEL}=true`" in row
    assert "65,536" in row and "maxPods" in row
    # The claim "dev runs them on rootless nodes": dev sets no hostUsers and no node affinity.
    assert "dev" in row
    for w in ds.workloads(renderings["overlay-dev"].docs):
        assert w.pod.spec.get("hostUsers") is not False, w.name
    # The README must not claim prod's userns pods run on a rootless kubelet.
    assert "works for the query, Qdrant and ingest pods" not in README
