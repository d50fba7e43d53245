#!/usr/bin/env python3
"""Check a live cluster for what a DocQuery overlay needs, and print what is missing.

    python3 deploy/k8s/verify.py --overlay prod [--with multinode-vllm] [--kubectl kubectl]

Read-only: runs `kubectl get`/`version`/`api-versions` only. Exit 0 when every
prerequisite is there, 1 when something is missing (one line each, with what to
do), 2 when kubectl itself cannot be run. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MIN_MINOR = 37

# What each overlay and opt-in component needs, beyond Kubernetes 1.37 itself.
NEEDS: dict[str, tuple[str, ...]] = {
    "base": ("injector", "vault", "gateway-api", "gateway", "default-storage"),
    "gpu-dra": ("dra-api", "dra-driver"),
    "multinode-vllm": ("lws", "workload-api", "gang-gate"),
    "multinode-vllm-tp": ("lws", "workload-api", "gang-gate"),
    "autoscaling": ("metrics-server", "external-metrics"),
    "monitoring": ("prometheus-operator",),
    "cilium-egress": ("cilium",),
    "models-from-snapshot": ("snapshot-crds", "snapshot-storage"),
    "kyverno": ("kyverno",),
    "vault-external": (),
}
OVERLAYS: dict[str, tuple[str, ...]] = {
    "dev": ("base",),
    "prod": (
        "base",
        "gpu-dra",
        "autoscaling",
        "monitoring",
        "cilium-egress",
        "models-from-snapshot",
    ),
}

# The custom resources the bundle creates or relies on, by check.
CRDS: dict[str, tuple[str, ...]] = {
    "gateway-api": ("gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"),
    "lws": ("leaderworkersets.leaderworkerset.x-k8s.io",),
    "prometheus-operator": ("podmonitors.monitoring.coreos.com",),
    "cilium": ("ciliumnetworkpolicies.cilium.io",),
    "kyverno": ("clusterpolicies.kyverno.io",),
    "snapshot-crds": (
        "volumesnapshots.snapshot.storage.k8s.io",
        "volumesnapshotclasses.snapshot.storage.k8s.io",
        "volumesnapshotcontents.snapshot.storage.k8s.io",
    ),
}
API_VERSIONS: dict[str, tuple[str, ...]] = {
    "dra-api": ("resource.k8s.io/v1",),
    "workload-api": ("scheduling.k8s.io/v1beta1",),
    "metrics-server": ("metrics.k8s.io/v1beta1",),
    "external-metrics": ("external.metrics.k8s.io/v1beta1",),
}
HINTS: dict[str, str] = {
    "gateway-api": "install the Gateway API CRDs (v1) and an implementation",
    "lws": "install the LeaderWorkerSet controller v0.10+",
    "prometheus-operator": "install the Prometheus Operator, or leave the monitoring component out",
    "cilium": "run Cilium (with its DNS proxy), or leave cilium-egress out",
    "kyverno": "install Kyverno, or skip policies/kyverno",
    "snapshot-crds": "install the CSI external-snapshotter CRDs and controller",
    "dra-api": "Kubernetes 1.34+ serves resource.k8s.io/v1; check --runtime-config",
    "workload-api": "start kube-apiserver with --runtime-config=scheduling.k8s.io/v1beta1=true",
    "metrics-server": "install metrics-server",
    "external-metrics": "install prometheus-adapter with the vLLM rule (README)",
}
GATE = "GenericWorkload"
DRA_DRIVER = "gpu.nvidia.com"
INJECTOR_WEBHOOK = "vault.hashicorp.com"
DEFAULT_SNAPSHOT_CLASS = "snapshot.storage.kubernetes.io/is-default-class"
DEFAULT_STORAGE_CLASS = "storageclass.kubernetes.io/is-default-class"

Runner = Callable[[list[str]], tuple[int, str]]


@dataclass(frozen=True)
class Missing:
    what: str
    fix: str

    def __str__(self) -> str:
        return f"missing: {self.what} -> {self.fix}"


class KubectlFailed(Exception):
    pass


def _json(run: Runner, args: list[str]) -> dict[str, Any]:
    rc, out = run([*args, "-o", "json"])
    if rc != 0:
        return {}
    try:
        data = json.loads(out)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _items(run: Runner, args: list[str]) -> list[dict[str, Any]]:
    items = _json(run, args).get("items")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def check_version(run: Runner) -> list[Missing]:
    data = _json(run, ["version"])
    server = data.get("serverVersion") or {}
    minor = re.match(r"\d+", str(server.get("minor", "")))
    if str(server.get("major")) != "1" or minor is None:
        raise KubectlFailed("kubectl version: no server version (is kubectl pointed at the cluster?)")
    if int(minor.group()) < MIN_MINOR:
        return [Missing(f"Kubernetes 1.{MIN_MINOR}+ (server is 1.{minor.group()})", "upgrade the cluster")]
    return []


def check_crds(run: Runner, needs: Iterable[str]) -> list[Missing]:
    rc, out = run(["get", "crd", "-o", "name"])
    have = {line.strip().removeprefix("customresourcedefinition.apiextensions.k8s.io/") for line in out.splitlines()}
    if rc != 0:
        have = set()
    return [
        Missing(f"CRD {crd}", HINTS[need]) for need in needs if need in CRDS for crd in CRDS[need] if crd not in have
    ]


def check_api_versions(run: Runner, needs: Iterable[str]) -> list[Missing]:
    rc, out = run(["api-versions"])
    have = set(out.split()) if rc == 0 else set()
    return [
        Missing(f"API {gv}", HINTS[need])
        for need in needs
        if need in API_VERSIONS
        for gv in API_VERSIONS[need]
        if gv not in have
    ]


def check_gang_gate(run: Runner) -> list[Missing]:
    """kube-apiserver's own view of the gate (kubernetes_feature_enabled); the scheduler
    and controller-manager need it too, which the API cannot show."""
    rc, out = run(["get", "--raw", "/metrics"])
    pattern = re.compile(r'^kubernetes_feature_enabled\{name="' + GATE + r'"[^}]*\}\s+1(\.0)?\s*$', re.M)
    if rc == 0 and pattern.search(out):
        return []
    return [
        Missing(
            f"feature gate {GATE} on kube-apiserver",
            f"enable {GATE} on kube-apiserver, kube-scheduler and kube-controller-manager",
        )
    ]


def check_injector(run: Runner) -> list[Missing]:
    for hook in _items(run, ["get", "mutatingwebhookconfigurations"]):
        if any(INJECTOR_WEBHOOK in str(w.get("name", "")) for w in hook.get("webhooks") or []):
            return []
    return [Missing("the Vault Agent Injector webhook", "install vault-k8s v1.7+ (Vault Helm chart, injector.enabled)")]


def check_vault(run: Runner) -> list[Missing]:
    pods = _items(run, ["get", "pods", "-n", "vault", "-l", "app.kubernetes.io/name=vault"])
    if pods:
        return []
    return [
        Missing(
            "Vault pods in namespace vault labelled app.kubernetes.io/name=vault",
            "the NetworkPolicies allow 8200 to those only: run Vault there, or use vault-external",
        )
    ]


def check_gateway(run: Runner) -> list[Missing]:
    if _json(run, ["get", "gateways.gateway.networking.k8s.io", "docquery", "-n", "gateway-system"]):
        return []
    return [Missing("Gateway gateway-system/docquery", "create it (README, Gateway API prerequisite)")]


def check_dra_driver(run: Runner) -> list[Missing]:
    out: list[Missing] = []
    if not _json(run, ["get", "deviceclasses.resource.k8s.io", DRA_DRIVER]):
        out.append(Missing(f"DeviceClass {DRA_DRIVER}", "install the NVIDIA DRA Driver for GPUs v25.12.0+"))
    slices = _items(run, ["get", "resourceslices.resource.k8s.io"])
    if not any((s.get("spec") or {}).get("driver") == DRA_DRIVER for s in slices):
        out.append(Missing(f"ResourceSlices published by driver {DRA_DRIVER}", "the DRA driver runs on no GPU node"))
    return out


def _is_default(obj: dict[str, Any], key: str) -> bool:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(key, "")).lower() == "true"


def _default_provisioners(run: Runner) -> list[Any]:
    classes = _items(run, ["get", "storageclasses.storage.k8s.io"])
    return [c.get("provisioner") for c in classes if _is_default(c, DEFAULT_STORAGE_CLASS)]


def check_default_storage(run: Runner) -> list[Missing]:
    """The bundle's PVCs name no class (Qdrant's volumes, the sources, the upload spool): they need a default."""
    if _default_provisioners(run):
        return []
    return [Missing("a default StorageClass", f"annotate one {DEFAULT_STORAGE_CLASS}=true")]


def check_snapshot_storage(run: Runner) -> list[Missing]:
    """A default VolumeSnapshotClass of the default StorageClass's CSI driver: the VolumeSnapshots name no
    class. A missing default StorageClass is check_default_storage's to report."""
    storage = _default_provisioners(run)
    if not storage:
        return []
    snaps = _items(run, ["get", "volumesnapshotclasses.snapshot.storage.k8s.io"])
    snapshot = [c.get("driver") for c in snaps if _is_default(c, DEFAULT_SNAPSHOT_CLASS)]
    if storage[0] not in snapshot:
        return [
            Missing(
                f"a default VolumeSnapshotClass for driver {storage[0]}",
                f"create one with driver {storage[0]} annotated {DEFAULT_SNAPSHOT_CLASS}=true",
            )
        ]
    return []


CHECKS: dict[str, Callable[[Runner], list[Missing]]] = {
    "gang-gate": check_gang_gate,
    "injector": check_injector,
    "vault": check_vault,
    "gateway": check_gateway,
    "dra-driver": check_dra_driver,
    "default-storage": check_default_storage,
    "snapshot-storage": check_snapshot_storage,
}


def needs_for(overlay: str, extra: Iterable[str] = ()) -> list[str]:
    parts = (*OVERLAYS[overlay], *extra)
    out: list[str] = []
    for part in parts:
        for need in NEEDS[part]:
            if need not in out:
                out.append(need)
    if "vault-external" in parts:  # Vault runs outside: no pods to find in namespace vault
        out.remove("vault")
    return out


def verify(run: Runner, overlay: str, extra: Iterable[str] = ()) -> list[Missing]:
    needs = needs_for(overlay, extra)
    missing = check_version(run)
    missing += check_crds(run, needs)
    missing += check_api_versions(run, needs)
    for need in needs:
        if need in CHECKS:
            missing += CHECKS[need](run)
    return missing


def kubectl_runner(kubectl: str) -> Runner:
    def run(args: list[str]) -> tuple[int, str]:
        try:
            # The operator's own kubectl with fixed read-only arguments.
            proc = subprocess.run(  # noqa: S603
                [kubectl, *args], capture_output=True, text=True, check=False, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KubectlFailed(f"cannot run {kubectl}: {type(exc).__name__}") from None
        return proc.returncode, proc.stdout

    return run


def main(argv: list[str] | None = None, run: Runner | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlay", choices=sorted(OVERLAYS), required=True)
    parser.add_argument("--with", dest="extra", action="append", default=[], choices=sorted(set(NEEDS) - {"base"}))
    parser.add_argument("--kubectl", default="kubectl")
    args = parser.parse_args(argv)
    try:
        missing = verify(run or kubectl_runner(args.kubectl), args.overlay, args.extra)
    except KubectlFailed as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    for m in missing:
        sys.stdout.write(f"{m}\n")
    if not missing:
        sys.stdout.write(f"ok: every prerequisite of overlay {args.overlay} is present\n")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
