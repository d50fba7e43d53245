"""CKV_DQ_6: a pod that uses secrets gets them from the Vault agent injector, configured safely."""

from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import DIGEST_RE, VAULT, PodTemplate, projected_token_volumes, uses_secrets, vault_injects


def _token_volume(pod: PodTemplate) -> list[str]:
    token_volume = pod.annotations.get(VAULT + "agent-service-account-token-volume-name")
    tokens = dict(projected_token_volumes(pod))
    if not token_volume:
        return [f"{VAULT}agent-service-account-token-volume-name missing"]
    if token_volume not in tokens:
        return [f"token volume {token_volume!r} is not a projected serviceAccountToken volume"]
    if tokens[token_volume].get("audience") != "vault":
        return [f"token volume {token_volume!r} must be bound to audience 'vault'"]
    return []


def _agent_image_and_size(a: dict[str, str]) -> list[str]:
    out = []
    # The injector's default agent image is a tag (vault-k8s agent.go DefaultVaultImage).
    if not DIGEST_RE.search(a.get(VAULT + "agent-image", "")):
        out.append(f"{VAULT}agent-image must pin the agent image by digest")
    for key in ("agent-requests-cpu", "agent-requests-mem", "agent-limits-cpu", "agent-limits-mem"):
        if not a.get(VAULT + key):
            out.append(f"{VAULT}{key} missing (the agent's size, and the bound on its in-memory volumes)")
    return out


class VaultAnnotations(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="Pods that use secrets carry complete Vault agent annotations (role, run-as, token volume, templates)",
            id="CKV_DQ_6",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        if not uses_secrets(pod):
            return []
        a = pod.annotations
        out: list[str] = []
        if not vault_injects(pod):
            return [f'uses secrets but {VAULT}agent-inject is not "true"']
        if not a.get(VAULT + "role"):
            out.append(f"{VAULT}role missing")
        for key in ("agent-run-as-user", "agent-run-as-group"):
            value = a.get(VAULT + key, "")
            if not value.isdigit() or int(value) == 0:
                out.append(f"{VAULT}{key} must be a non-zero id")
        out += _token_volume(pod)
        out += _agent_image_and_size(a)
        secrets = [k[len(VAULT + "agent-inject-secret-") :] for k in a if k.startswith(VAULT + "agent-inject-secret-")]
        if not secrets:
            out.append("no agent-inject-secret-* annotation although the pod reads /vault/secrets")
        for name in secrets:
            if not a.get(VAULT + "agent-inject-template-" + name):
                out.append(f"secret {name}: no agent-inject-template-{name} (raw JSON would be rendered)")
            if not a.get(VAULT + "agent-inject-secret-" + name, "").startswith("secret/data/docquery/"):
                out.append(f"secret {name}: path must be under secret/data/docquery/ (KV v2)")
        if pod.kind in ("Job", "CronJob") and a.get(VAULT + "agent-pre-populate-only") != "true":
            out.append('Jobs need agent-pre-populate-only: "true" or the agent sidecar never exits')
        return out


check = VaultAnnotations()
