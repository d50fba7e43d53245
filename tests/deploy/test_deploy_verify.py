"""deploy/k8s/verify.py: what it reports missing, against fake kubectl output."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
import yaml

_spec = importlib.util.spec_from_file_location("dq_verify", ds.K8S / "verify.py")
assert _spec and _spec.loader
verify = importlib.util.module_from_spec(_spec)
sys.modules["dq_verify"] = verify
_spec.loader.exec_module(verify)

FULL: dict[str, Any] = {
    "minor": "37",
    "crds": sorted(c for crds in verify.CRDS.values() for c in crds),
    "api_versions": ["v1", "apps/v1", *sorted(g for gs in verify.API_VERSIONS.values() for g in gs)],
    "gates": {"GenericWorkload": 1},
    "webhooks": ["vault.hashicorp.com"],
    "vault_pods": 1,
    "gateway": True,
    "deviceclass": True,
    "slices": ["gpu.nvidia.com"],
    "storage": [("fast", "ebs.csi.aws.com", True)],
    "snapshot": [("snap", "ebs.csi.aws.com", True)],
}


def fake_kubectl(state: dict[str, Any]) -> verify.Runner:
    """Answers the read-only commands verify.py runs the way kubectl would print them."""

    def items(objs: list[dict[str, Any]]) -> tuple[int, str]:
        return 0, json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})

    def default(key: str, on: bool) -> dict[str, Any]:
        return {"annotations": {key: "true"}} if on else {}

    def exists(ok: bool, kind: str) -> tuple[int, str]:
        return (0, json.dumps({"kind": kind})) if ok else (1, "")

    def classes(rows: list[tuple[str, str, bool]], key: str, field: str) -> tuple[int, str]:
        return items([{"metadata": {"name": n, **default(key, d)}, field: p} for n, p, d in rows])

    gates = "".join(f'kubernetes_feature_enabled{{name="{g}",stage="BETA"}} {v}\n' for g, v in state["gates"].items())
    answers: dict[tuple[str, ...], Any] = {
        ("version",): lambda: (0, json.dumps({"serverVersion": {"major": "1", "minor": state["minor"]}})),
        ("get", "crd", "-o", "name"): lambda: (
            0,
            "".join(f"customresourcedefinition.apiextensions.k8s.io/{c}\n" for c in state["crds"]),
        ),
        ("api-versions",): lambda: (0, "\n".join(state["api_versions"]) + "\n"),
        ("get", "--raw", "/metrics"): lambda: (0, "# HELP x\n" + gates),
        ("get", "mutatingwebhookconfigurations"): lambda: items(
            [{"webhooks": [{"name": w}]} for w in state["webhooks"]]
        ),
        ("get", "pods", "-n", "vault", "-l", "app.kubernetes.io/name=vault"): lambda: items(
            [{"metadata": {"name": f"vault-{i}"}} for i in range(state["vault_pods"])]
        ),
        ("get", "gateways.gateway.networking.k8s.io", "docquery", "-n", "gateway-system"): lambda: exists(
            state["gateway"], "Gateway"
        ),
        ("get", "deviceclasses.resource.k8s.io", "gpu.nvidia.com"): lambda: exists(state["deviceclass"], "DeviceClass"),
        ("get", "resourceslices.resource.k8s.io"): lambda: items([{"spec": {"driver": d}} for d in state["slices"]]),
        ("get", "storageclasses.storage.k8s.io"): lambda: classes(
            state["storage"], verify.DEFAULT_STORAGE_CLASS, "provisioner"
        ),
        ("get", "volumesnapshotclasses.snapshot.storage.k8s.io"): lambda: classes(
            state["snapshot"], verify.DEFAULT_SNAPSHOT_CLASS, "driver"
        ),
    }

    def run(args: list[str]) -> tuple[int, str]:
        key = tuple(args[:-2]) if args[-2:] == ["-o", "json"] else tuple(args)
        assert key in answers, f"verify.py ran an unexpected command: kubectl {' '.join(args)}"
        result: tuple[int, str] = answers[key]()
        return result

    return run


def _missing(state: dict[str, Any], overlay: str = "prod", extra: tuple[str, ...] = ("multinode-vllm",)) -> list[str]:
    return [m.what for m in verify.verify(fake_kubectl(state), overlay, extra)]


def _without(**changes: Any) -> dict[str, Any]:
    state = copy.deepcopy(FULL)
    state.update(changes)
    return state


def test_a_complete_cluster_has_nothing_missing() -> None:
    assert _missing(FULL) == []


CRD = "leaderworkersets.leaderworkerset.x-k8s.io"


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (_without(minor="36"), "Kubernetes 1.37+ (server is 1.36)"),
        (_without(crds=[c for c in FULL["crds"] if c != CRD]), f"CRD {CRD}"),
        (
            _without(crds=[c for c in FULL["crds"] if "snapshot" not in c]),
            "CRD volumesnapshots.snapshot.storage.k8s.io",
        ),
        (
            _without(api_versions=[g for g in FULL["api_versions"] if g != "scheduling.k8s.io/v1beta1"]),
            "API scheduling.k8s.io/v1beta1",
        ),
        (
            _without(api_versions=[g for g in FULL["api_versions"] if not g.startswith("external")]),
            "API external.metrics.k8s.io/v1beta1",
        ),
        (_without(gates={"GenericWorkload": 0}), "feature gate GenericWorkload on kube-apiserver"),
        (_without(gates={}), "feature gate GenericWorkload on kube-apiserver"),
        (_without(webhooks=["sidecar-injector.istio.io"]), "the Vault Agent Injector webhook"),
        (_without(vault_pods=0), "Vault pods in namespace vault labelled app.kubernetes.io/name=vault"),
        (_without(gateway=False), "Gateway gateway-system/docquery"),
        (_without(deviceclass=False), "DeviceClass gpu.nvidia.com"),
        (_without(slices=["other.example.com"]), "ResourceSlices published by driver gpu.nvidia.com"),
        (_without(storage=[("fast", "ebs.csi.aws.com", False)]), "a default StorageClass"),
        (
            _without(snapshot=[("snap", "pd.csi.storage.gke.io", True)]),
            "a default VolumeSnapshotClass for driver ebs.csi.aws.com",
        ),
        (
            _without(snapshot=[("snap", "ebs.csi.aws.com", False)]),
            "a default VolumeSnapshotClass for driver ebs.csi.aws.com",
        ),
    ],
)
def test_each_missing_prerequisite_is_named(state: dict[str, Any], expected: str) -> None:
    assert expected in _missing(state)
    assert all(m == expected or m.startswith("CRD volumesnapshot") for m in _missing(state))


def test_dev_needs_a_default_storage_class_for_its_claims() -> None:
    assert _missing(_without(storage=[("fast", "ebs.csi.aws.com", False)]), "dev", ()) == ["a default StorageClass"]


def test_an_external_vault_needs_no_vault_pods() -> None:
    assert _missing(_without(vault_pods=0), "prod", ("vault-external",)) == []


def test_dev_needs_no_gpu_or_snapshot_machinery() -> None:
    bare = _without(crds=list(verify.CRDS["gateway-api"]), api_versions=["v1"], deviceclass=False, slices=[], gates={})
    assert _missing(bare, "dev", ()) == []
    assert "DeviceClass gpu.nvidia.com" in _missing(bare, "prod", ())


def test_main_prints_one_line_each_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc = verify.main(["--overlay", "prod"], run=fake_kubectl(_without(gateway=False, vault_pods=0)))
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert lines == [
        "missing: Vault pods in namespace vault labelled app.kubernetes.io/name=vault -> the NetworkPolicies allow "
        "8200 to those only: run Vault there, or use vault-external",
        "missing: Gateway gateway-system/docquery -> create it (README, Gateway API prerequisite)",
    ]
    assert verify.main(["--overlay", "prod"], run=fake_kubectl(FULL)) == 0


def test_no_cluster_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert verify.main(["--overlay", "dev"], run=lambda _args: (1, "")) == 2
    assert capsys.readouterr().err.startswith("error: kubectl version: no server version")


def test_the_real_runner_calls_kubectl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through a kubectl stand-in on disk: the arguments arrive as verify.py built them."""
    log = tmp_path / "calls"
    fake = tmp_path / "kubectl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
    fake.chmod(0o755)
    assert verify.main(["--overlay", "dev", "--kubectl", str(fake)]) == 2
    assert log.read_text().splitlines() == ["version -o json"]
    assert verify.main(["--overlay", "dev", "--kubectl", str(tmp_path / "absent")]) == 2
    capsys.readouterr()


def test_overlays_and_verify_agree_on_the_components() -> None:
    """verify.py checks what each overlay's components need: the lists cannot drift."""
    for name, parts in verify.OVERLAYS.items():
        k = yaml.safe_load((ds.K8S / "overlays" / name / "kustomization.yaml").read_text())
        used = {c.rsplit("/", 1)[-1] for c in k.get("components", [])}
        assert set(parts) - {"base"} == used & set(verify.NEEDS), name
    assert set(verify.OVERLAYS) == set(ds.overlay_names())
