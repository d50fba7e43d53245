"""The README's first install, run as a script against the rendered output: every step
references only what earlier steps created or the cluster's prerequisites provide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deploy_support as ds
import install_order
import pytest
from test_deploy_verify import verify

README = (ds.K8S / "README.md").read_text()
SECTION = "First install (Kubernetes 1.37)"


@pytest.fixture(scope="module")
def render(kubectl: Path) -> Any:
    cache: dict[str, list[dict[str, Any]]] = {}

    def _render(target: str) -> list[dict[str, Any]]:
        if target not in cache:
            cache[target] = ds.load_docs(ds.render(kubectl, ds.REPO / target))
        return cache[target]

    return _render


def _cluster(without: str = "") -> install_order.Cluster:
    crds = {c for crds in verify.CRDS.values() for c in crds if c != without}
    return install_order.Cluster(crds=crds)


def test_the_readme_install_runs_in_order(render: Any) -> None:
    commands = install_order.readme_commands(README, SECTION)
    assert any(w[:3] == ["kubectl", "apply", "-k"] for w in commands)
    cluster = _cluster()
    assert install_order.run(commands, render, cluster) == []
    # It reaches the first answer: the overlay, the weights and an ingest are all in.
    for key in [
        ("Deployment", "docquery-query"),
        ("PersistentVolumeClaim", "docquery-models"),
        ("Job", "docquery-ingest"),
    ]:
        assert key in cluster.objects, key


def _cmds(*lines: str) -> list[list[str]]:
    return [line.split() for line in lines]


NS = "kubectl apply -k deploy/k8s/base/namespace"
LOAD = "kubectl apply -k deploy/k8s/overlays/prod/models"
WAIT_LOAD = "kubectl -n docquery wait --for=condition=complete job/docquery-models-load"
SNAP = "kubectl apply -k deploy/k8s/base/models-snapshot"
WAIT_SNAP = "kubectl -n docquery wait --for=jsonpath={.status.readyToUse}=true volumesnapshot/docquery-models-v1"
PROD = "kubectl apply -k deploy/k8s/overlays/prod"
CA = "kubectl -n docquery create secret generic vault-ca --from-file=ca.crt=vault-ca.pem"


@pytest.mark.parametrize(
    ("commands", "problem"),
    [
        # The order the README had: the snapshot before the namespace existed.
        (_cmds(SNAP, PROD), "VolumeSnapshot/docquery-models-v1 needs Namespace/docquery"),
        # The overlay with no weights behind its models PVC.
        (_cmds(NS, PROD), "PVC/docquery-models dataSource needs VolumeSnapshot/docquery-models-v1, which does not"),
        # Snapshotting the staging volume while the loader still writes it.
        (_cmds(NS, LOAD, SNAP), "needs Job/docquery-models-load finished"),
        (_cmds(NS, LOAD, WAIT_LOAD, SNAP, PROD), "needs VolumeSnapshot/docquery-models-v1 finished"),
        (_cmds("kubectl -n docquery rollout status deployment/docquery-query", PROD), "rollout"),
        # The agents' CA Secret missing when the injected pods are created.
        (_cmds(NS, LOAD, WAIT_LOAD, SNAP, WAIT_SNAP, PROD), "tls-secret needs Secret/vault-ca"),
    ],
)
def test_orders_that_cannot_work_are_refused(render: Any, commands: list[list[str]], problem: str) -> None:
    problems = install_order.run(commands, render, _cluster())
    assert any(problem in p for p in problems), problems


def test_the_right_order_passes(render: Any) -> None:
    assert install_order.run(_cmds(NS, CA, LOAD, WAIT_LOAD, SNAP, WAIT_SNAP, PROD), render, _cluster()) == []


def test_a_kind_without_its_crd_is_refused(render: Any) -> None:
    problems = install_order.run(_cmds(NS, PROD), render, _cluster(without="ciliumnetworkpolicies.cilium.io"))
    assert any("no CiliumNetworkPolicy API" in p for p in problems), problems


def test_the_models_volume_can_hold_the_snapshot(renderings: dict[str, ds.Rendering]) -> None:
    """A PVC restored from a snapshot must request at least the snapshot's restoreSize,
    which is the staging volume's size."""

    def gib(pvc: dict[str, Any]) -> int:
        size = pvc["spec"]["resources"]["requests"]["storage"]
        assert size.endswith("Gi"), size
        return int(size[:-2])

    r = renderings["overlay-prod"]
    snap = r.get("VolumeSnapshot", "docquery-models-v1")
    staging = r.get("PersistentVolumeClaim", snap["spec"]["source"]["persistentVolumeClaimName"])
    models = r.get("PersistentVolumeClaim", "docquery-models")
    assert models["spec"]["dataSource"]["name"] == snap["metadata"]["name"]
    assert gib(models) >= gib(staging)
