"""CKV_DQ_11: namespaces enforce, audit and warn on Pod Security "restricted", with a pinned version."""

from __future__ import annotations

from typing import Any

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.kubernetes.checks.resource.base_spec_check import BaseK8Check


class NamespaceRestricted(BaseK8Check):
    def __init__(self) -> None:
        super().__init__(
            name="Namespace carries pod-security.kubernetes.io enforce/audit/warn=restricted and versions",
            id="CKV_DQ_11",
            categories=(CheckCategories.KUBERNETES,),
            supported_entities=("Namespace",),
        )

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        labels = (conf.get("metadata") or {}).get("labels") or {}
        for mode in ("enforce", "audit", "warn"):
            if labels.get(f"pod-security.kubernetes.io/{mode}") != "restricted":
                return CheckResult.FAILED
            if not labels.get(f"pod-security.kubernetes.io/{mode}-version"):
                return CheckResult.FAILED
        return CheckResult.PASSED


check = NamespaceRestricted()
