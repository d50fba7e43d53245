"""CKV_DQ_7: no Kubernetes API token in pods; only an audience-bound token for Vault, where Vault is used."""

from __future__ import annotations

from typing import Any

from dq_base import DQPodCheck
from dq_podspec import PodTemplate, projected_token_volumes, vault_injects

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.kubernetes.checks.resource.base_spec_check import BaseK8Check


class ServiceAccountTokens(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="automountServiceAccountToken is false; projected tokens only with audience vault, "
            "only for the Vault agent",
            id="CKV_DQ_7",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        out: list[str] = []
        if pod.spec.get("automountServiceAccountToken") is not False:
            out.append("automountServiceAccountToken must be false")
        if pod.spec.get("serviceAccountName") in (None, "", "default"):
            out.append("serviceAccountName must name a dedicated service account")
        for name, token in projected_token_volumes(pod):
            if token.get("audience") != "vault":
                out.append(f"volume {name}: projected token without audience 'vault'")
            if int(token.get("expirationSeconds") or 3600) > 3600:
                out.append(f"volume {name}: token lifetime above one hour")
            if not vault_injects(pod):
                out.append(f"volume {name}: a token is projected but no Vault agent uses it")
        return out


class ServiceAccountNoAutomount(BaseK8Check):
    def __init__(self) -> None:
        super().__init__(
            name="ServiceAccounts do not automount API tokens",
            id="CKV_DQ_8",
            categories=(CheckCategories.KUBERNETES,),
            supported_entities=("ServiceAccount",),
        )

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        return CheckResult.PASSED if conf.get("automountServiceAccountToken") is False else CheckResult.FAILED


check = ServiceAccountTokens()
check_sa = ServiceAccountNoAutomount()
