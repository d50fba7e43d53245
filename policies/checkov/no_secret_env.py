"""CKV_DQ_4: no secret in an environment variable (env is world-readable in /proc and in logs)."""

from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import PodTemplate, is_secret_like_env


class NoSecretEnv(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="No secret-like env vars, secretKeyRef or envFrom secretRef: secrets are Vault-rendered files",
            id="CKV_DQ_4",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        out: list[str] = []
        for c in pod.containers():
            name = c.get("name")
            for e in c.get("env") or []:
                if not isinstance(e, dict):
                    continue
                if is_secret_like_env(str(e.get("name", ""))):
                    out.append(f"container {name}: env {e.get('name')} looks like a secret")
                if "secretKeyRef" in (e.get("valueFrom") or {}):
                    out.append(f"container {name}: env {e.get('name')} comes from a Secret")
            for ef in c.get("envFrom") or []:
                if isinstance(ef, dict) and "secretRef" in ef:
                    out.append(f"container {name}: envFrom secretRef is not allowed")
        return out


check = NoSecretEnv()
