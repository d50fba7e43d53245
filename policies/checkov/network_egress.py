"""CKV_DQ_9 / CKV_DQ_10: no egress to the whole Internet, and DNS only to kube-dns."""

from __future__ import annotations

from typing import Any

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.kubernetes.checks.resource.base_spec_check import BaseK8Check

WORLD = {"0.0.0.0/0", "::/0"}


def _is_kube_dns_peer(peer: dict[str, Any]) -> bool:
    ns = (peer.get("namespaceSelector") or {}).get("matchLabels") or {}
    pods = (peer.get("podSelector") or {}).get("matchLabels") or {}
    return ns.get("kubernetes.io/metadata.name") == "kube-system" and pods.get("k8s-app") == "kube-dns"


def _k8s_rule(rule: dict[str, Any]) -> list[str]:
    # A rule without `to` allows every destination.
    out = [] if rule.get("to") else ["has no 'to': it allows every destination"]
    for peer in rule.get("to") or []:
        cidr = ((peer or {}).get("ipBlock") or {}).get("cidr")
        if cidr in WORLD:
            out.append(f"allows {cidr}")
    return out


def _cilium_rule(rule: dict[str, Any]) -> list[str]:
    out = []
    for key in ("toCIDR", "toCIDRSet"):
        for entry in rule.get(key) or []:
            cidr = entry.get("cidr") if isinstance(entry, dict) else entry
            if cidr in WORLD:
                out.append(f"{key} allows {cidr}")
    if set(rule.get("toEntities") or []) & {"world", "all"}:
        out.append("toEntities allows the world")
    if any(str((f or {}).get("matchPattern", "")).strip() == "*" for f in rule.get("toFQDNs") or []):
        out.append("toFQDNs matchPattern '*' allows every host")
    return out


class NoWorldEgress(BaseK8Check):
    def __init__(self) -> None:
        super().__init__(
            name="No NetworkPolicy egress to 0.0.0.0/0, ::/0, or to any destination (rule without 'to')",
            id="CKV_DQ_9",
            categories=(CheckCategories.NETWORKING,),
            supported_entities=("NetworkPolicy", "CiliumNetworkPolicy"),
        )

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        problems: list[str] = []
        for i, rule in enumerate((conf.get("spec") or {}).get("egress") or []):
            if isinstance(rule, dict):
                inspect = _k8s_rule if conf.get("kind") == "NetworkPolicy" else _cilium_rule
                problems += [f"egress[{i}] {p}" for p in inspect(rule)]
        self.details = problems
        return CheckResult.FAILED if problems else CheckResult.PASSED


class DnsOnlyToKubeDns(BaseK8Check):
    def __init__(self) -> None:
        super().__init__(
            name="Egress on port 53 goes to kube-dns only (namespace AND pod selector in one peer)",
            id="CKV_DQ_10",
            categories=(CheckCategories.NETWORKING,),
            supported_entities=("NetworkPolicy",),
        )

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        problems: list[str] = []
        for i, rule in enumerate((conf.get("spec") or {}).get("egress") or []):
            if not isinstance(rule, dict):
                continue
            ports = rule.get("ports") or []
            # No ports means all ports, 53 included.
            opens_53 = not ports or any(str((p or {}).get("port")) in ("53", "dns", "dns-tcp") for p in ports)
            peers = rule.get("to") or [{}]
            # Same-namespace "all ports" peers (e.g. an LWS group) are not DNS servers.
            reaches_out = bool(ports) or any("namespaceSelector" in (p or {}) or "ipBlock" in (p or {}) for p in peers)
            if opens_53 and reaches_out and not all(_is_kube_dns_peer(p or {}) for p in peers):
                problems.append(f"egress[{i}] opens port 53 to something other than kube-dns")
        self.details = problems
        return CheckResult.FAILED if problems else CheckResult.PASSED


check_world = NoWorldEgress()
check_dns = DnsOnlyToKubeDns()
