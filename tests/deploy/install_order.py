"""Run the README's install steps, in order, against the rendered objects.

Each `kubectl apply -k DIR` creates what DIR renders; `kubectl wait` records that
an object reached a state; `create secret`, `rollout status`, `port-forward` and
`delete` act on one object. Every object a step creates may only reference what
exists by then (created earlier or in the same apply: controllers retry until a
referenced object appears, and kustomize puts a Namespace first) or what the cluster brings
(built-in kinds, the CRDs deploy/k8s/verify.py checks). Content that must be
finished, not only created, must have been waited for in an earlier step: a PVC
restored from a snapshot needs the snapshot ready, a snapshot of a volume a Job
fills needs that Job complete.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import deploy_support as ds

BUILTIN_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "Service",
    "PersistentVolumeClaim",
    "LimitRange",
    "PriorityClass",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "Deployment",
    "StatefulSet",
    "Job",
    "CronJob",
    "HorizontalPodAutoscaler",
    "ResourceClaimTemplate",
    "Workload",
    "PodGroup",
}
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterPolicy"}
Key = tuple[str, str]  # (kind, name); everything namespaced lives in docquery


def plural(kind: str) -> str:
    low = kind.lower()
    return low[:-1] + "ies" if low.endswith("y") else low + "s"


@dataclass
class Cluster:
    crds: set[str]  # "<plural>.<group>" names the cluster serves
    objects: list[Key] = field(default_factory=list)
    ready: set[Key] = field(default_factory=set)  # waited for: Job complete, snapshot readyToUse
    writers: dict[str, Key] = field(default_factory=dict)  # PVC -> Job that writes it
    problems: list[str] = field(default_factory=list)

    def has(self, key: Key) -> bool:
        return key in self.objects

    def need(self, step: str, key: Key, why: str) -> None:
        if not self.has(key):
            self.problems.append(f"{step}: {why} needs {key[0]}/{key[1]}, which does not exist yet")

    def need_ready(self, step: str, key: Key, why: str) -> None:
        self.need(step, key, why)
        if self.has(key) and key not in self.ready:
            self.problems.append(f"{step}: {why} needs {key[0]}/{key[1]} finished; wait for it in an earlier step")


def _serves(cluster: Cluster, doc: dict[str, Any]) -> bool:
    kind = doc["kind"]
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    return kind in BUILTIN_KINDS or f"{plural(kind)}.{group}" in cluster.crds


def pod_references(spec: dict[str, Any]) -> Iterator[tuple[Key, str]]:
    if spec.get("serviceAccountName"):
        yield ("ServiceAccount", spec["serviceAccountName"]), "serviceAccountName"
    if spec.get("priorityClassName"):
        yield ("PriorityClass", spec["priorityClassName"]), "priorityClassName"
    for v in spec.get("volumes") or []:
        if "persistentVolumeClaim" in v:
            yield ("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]), f"volume {v['name']}"
        if "configMap" in v and not v["configMap"].get("optional"):
            yield ("ConfigMap", v["configMap"]["name"]), f"volume {v['name']}"
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for e in c.get("envFrom") or []:
            ref = e.get("configMapRef")
            if ref and not ref.get("optional"):
                yield ("ConfigMap", ref["name"]), f"container {c['name']} envFrom"
    for claim in spec.get("resourceClaims") or []:
        if claim.get("resourceClaimTemplateName"):
            yield ("ResourceClaimTemplate", claim["resourceClaimTemplateName"]), "resourceClaims"
    group = (spec.get("schedulingGroup") or {}).get("podGroupName")
    if group:
        yield ("PodGroup", group), "schedulingGroup"


def _writable_claims(spec: dict[str, Any]) -> set[str]:
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in spec.get("volumes") or []
        if "persistentVolumeClaim" in v and not v["persistentVolumeClaim"].get("readOnly")
    }
    return {
        claims[m["name"]]
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        for m in c.get("volumeMounts") or []
        if m["name"] in claims and not m.get("readOnly")
    }


def _create(cluster: Cluster, step: str, doc: dict[str, Any]) -> None:
    kind, name = doc["kind"], doc["metadata"]["name"]
    where = f"{step}: {kind}/{name}"
    if not _serves(cluster, doc):
        cluster.problems.append(f"{where}: the cluster has no {kind} API (not built in, no prerequisite CRD)")
    if kind not in CLUSTER_SCOPED:
        cluster.need(step, ("Namespace", doc["metadata"].get("namespace", "default")), f"{kind}/{name}")
    for w in ds.workloads([doc]):
        for key, why in pod_references(w.pod.spec):
            cluster.need(step, key, f"{kind}/{name} {why}")
        tls = w.pod.annotations.get("vault.hashicorp.com/tls-secret")
        if tls:  # the injector mounts it into the agents: the pod cannot start without it
            cluster.need(step, ("Secret", tls), f"{kind}/{name} vault.hashicorp.com/tls-secret")
        if kind == "Job":
            for claim in _writable_claims(w.pod.spec):
                cluster.writers[claim] = (kind, name)
    spec = doc.get("spec") or {}
    if kind == "PersistentVolumeClaim" and (spec.get("dataSource") or {}).get("kind") == "VolumeSnapshot":
        cluster.need_ready(step, ("VolumeSnapshot", spec["dataSource"]["name"]), f"PVC/{name} dataSource")
    if kind == "VolumeSnapshot":
        pvc = spec["source"]["persistentVolumeClaimName"]
        cluster.need(step, ("PersistentVolumeClaim", pvc), f"VolumeSnapshot/{name}")
        if pvc in cluster.writers:
            cluster.need_ready(step, cluster.writers[pvc], f"VolumeSnapshot/{name} of PVC/{pvc}")
    if kind == "HorizontalPodAutoscaler":
        ref = spec["scaleTargetRef"]
        cluster.need(step, (ref["kind"], ref["name"]), f"HPA/{name}")


_RESOURCE = {"job": "Job", "volumesnapshot": "VolumeSnapshot", "deployment": "Deployment", "statefulset": "StatefulSet"}
_RESOURCE |= {"pod": "Pod", "secret": "Secret", "cronjob": "CronJob"}


def _target(word: str) -> Key:
    kind, _, name = word.partition("/")
    return _RESOURCE[kind.lower()], name


def run(commands: list[list[str]], render: Callable[[str], list[dict[str, Any]]], cluster: Cluster) -> list[str]:
    """Apply the README's commands in order; return what would fail."""
    for words in commands:
        if not words or words[0] != "kubectl":
            continue
        step = " ".join(words)
        args = [w for i, w in enumerate(words) if w != "-n" and (i == 0 or words[i - 1] != "-n")][1:]
        verb = args[0] if args else ""
        if verb == "apply" and "-k" in args:
            docs = render(args[args.index("-k") + 1])
            # One apply: its objects may name each other (controllers retry until the
            # other exists); only what must be finished has to come from earlier steps.
            for doc in docs:
                key = (doc["kind"], doc["metadata"]["name"])
                if key not in cluster.objects:
                    cluster.objects.append(key)
            for doc in docs:
                _create(cluster, step, doc)
        elif verb == "wait":
            key = _target(next(a for a in args[1:] if "/" in a and not a.startswith("--")))
            cluster.need(step, key, "kubectl wait")
            cluster.ready.add(key)
        elif verb in ("port-forward",) or args[:2] == ["rollout", "status"]:
            target = next(a for a in args[1:] if "/" in a)
            key = _target(target)
            if key[0] != "Pod":
                cluster.need(step, key, verb)
        elif args[:3] == ["create", "secret", "generic"]:
            cluster.need(step, ("Namespace", ds.NAMESPACE), "the Secret")
            cluster.objects.append(("Secret", args[3]))
        elif verb == "delete" and len(args) >= 3:
            key = (_RESOURCE[args[1].lower()], args[2])
            if key in cluster.objects:
                cluster.objects.remove(key)
            cluster.ready.discard(key)
    return cluster.problems


def readme_commands(readme: str, section: str) -> list[list[str]]:
    """The shell commands of one README section, in order (continuations joined, comments dropped)."""
    body = readme.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    out = []
    for block in re.findall(r"```sh\n(.*?)```", body, flags=re.S):
        for raw in block.replace("\\\n", " ").splitlines():
            line = raw.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(shlex.split(line, comments=True))
    return out
