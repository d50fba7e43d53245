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


class NoWorldEgress(BaseK8Check):
    def __init__(self) -> None:
        super().__init__(
            name="No NetworkPolicy egress to 0.0.0.0/0, ::/0, or to any destination (rule without 'to')",
            id="CKV_DQ_9",
            categories=(CheckCategories.NETWORKING,),
            supported_entities=("NetworkPolicy", "CiliumNetworkPolicy"),
        )

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        spec = conf.get("spec") or {}
        problems: list[str] = []
        for i, rule in enumerate(spec.get("egress") or []):
            if not isinstance(rule, dict):
                continue
            if conf.get("kind") == "NetworkPolicy":
                # A rule without `to` allows every destination.
                if not rule.get("to"):
                    problems.append(f"egress[{i}] has no 'to': it allows every destination")
                for peer in rule.get("to") or []:
                    cidr = ((peer or {}).get("ipBlock") or {}).get("cidr")
                    if cidr in WORLD:
                        problems.append(f"egress[{i}] allows {cidr}")
            else:  # CiliumNetworkPolicy
                for key in ("toCIDR", "toCIDRSet"):
                    for entry in rule.get(key) or []:
                        cidr = entry.get("cidr") if isinstance(entry, dict) else entry
                        if cidr in WORLD:
                            problems.append(f"egress[{i}].{key} allows {cidr}")
                if set(rule.get("toEntities") or []) & {"world", "all"}:
                    problems.append(f"egress[{i}].toEntities allows the world")
                for fqdn in rule.get("toFQDNs") or []:
                    if str((fqdn or {}).get("matchPattern", "")).strip() == "*":
                        problems.append(f"egress[{i}].toFQDNs matchPattern '*' allows every host")
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
            if opens_53 and not all(_is_kube_dns_peer(p or {}) for p in rule.get("to") or [{}]):
                # Intra-namespace "all ports" peers (e.g. an LWS group) are not DNS servers.
                if ports or any("namespaceSelector" in (p or {}) or "ipBlock" in (p or {}) for p in rule.get("to") or [{}]):
                    problems.append(f"egress[{i}] opens port 53 to something other than kube-dns")
        self.details = problems
        return CheckResult.FAILED if problems else CheckResult.PASSED


check_world = NoWorldEgress()
check_dns = DnsOnlyToKubeDns()
