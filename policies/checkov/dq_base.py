"""Base class for the DocQuery pod rules (not a check itself)."""

from __future__ import annotations

from typing import Any

from dq_podspec import POD_KINDS, PodTemplate, pod_templates

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.kubernetes.checks.resource.base_spec_check import BaseK8Check


class DQPodCheck(BaseK8Check):
    """A rule over every pod template of a resource; fails on any violation."""

    def __init__(self, name: str, id: str, kinds: tuple[str, ...] = POD_KINDS) -> None:
        super().__init__(name=name, id=id, categories=(CheckCategories.KUBERNETES,), supported_entities=kinds)

    def violations(self, pod: PodTemplate) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        problems: list[str] = []
        for pod in pod_templates(conf):
            problems.extend(f"{pod.where or 'pod'}: {p}" for p in self.violations(pod))
        # Shown by checkov next to the failure (and read by tests/deploy).
        self.details = problems
        return CheckResult.FAILED if problems else CheckResult.PASSED
