"""Shared helpers for the DocQuery checkov policies (not a check itself).

Every pod-bearing kind, including the LeaderWorkerSet CRD that checkov's own
checks do not understand, is reduced to a list of ``PodTemplate`` views so that
each rule is written once against a pod spec.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

POD_KINDS = (
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "LeaderWorkerSet",
)

VAULT = "vault.hashicorp.com/"
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")
# A variable whose name says it holds a credential. Names that only point at
# one (…_DIR, …_FILE, …_PATH, …_URL) are fine: secrets are files.
SECRET_ENV_RE = re.compile(
    r"(^|_)(API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIALS?|AUTH)(_|$)"
)
POINTER_SUFFIX_RE = re.compile(r"_(DIR|FILE|PATH|URL)$")
# What the Vault Agent Injector adds to a pod (vault-k8s v1.7.6, agent-inject/agent/
# container_volume.go and container_*sidecar.go): Memory emptyDirs without sizeLimit.
INJECTOR_CONTAINERS = ("vault-agent-init", "vault-agent")
INJECTOR_VOLUMES = ("vault-secrets", "home-init", "home-sidecar")
ALLOWED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


@dataclass
class PodTemplate:
    kind: str
    where: str  # e.g. "spec/template" or "spec/leaderWorkerTemplate/workerTemplate"
    metadata: dict[str, Any]
    spec: dict[str, Any]

    @property
    def annotations(self) -> dict[str, str]:
        raw = self.metadata.get("annotations") or {}
        if isinstance(raw, list):  # checkov hands some kinds' annotations over as a list of mappings
            merged: dict[str, Any] = {}
            for item in raw:
                if isinstance(item, dict):
                    merged.update(item)
            raw = merged
        return {str(k): str(v) for k, v in raw.items() if not str(k).startswith("__")}

    def containers(self) -> Iterator[dict[str, Any]]:
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for container in self.spec.get(key) or []:
                if isinstance(container, dict):
                    yield container

    def volumes(self) -> list[dict[str, Any]]:
        return [v for v in self.spec.get("volumes") or [] if isinstance(v, dict)]


def _first(value: Any) -> Any:
    # checkov wraps some scalars in single-item lists; accept both shapes.
    if isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def pod_templates(conf: dict[str, Any]) -> list[PodTemplate]:
    kind = _first(conf.get("kind"))
    spec = conf.get("spec") or {}
    found: list[tuple[str, Any]] = []
    if kind == "Pod":
        found.append(("", {"metadata": conf.get("metadata") or {}, "spec": spec}))
    elif kind == "CronJob":
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        found.append(("spec/jobTemplate/spec/template", job_spec.get("template")))
    elif kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        found.append(("spec/leaderWorkerTemplate/leaderTemplate", lwt.get("leaderTemplate")))
        found.append(("spec/leaderWorkerTemplate/workerTemplate", lwt.get("workerTemplate")))
    else:
        found.append(("spec/template", spec.get("template")))
    return [
        PodTemplate(kind=str(kind), where=where, metadata=t.get("metadata") or {}, spec=t.get("spec") or {})
        for where, t in found
        if isinstance(t, dict)
    ]


def is_secret_like_env(name: str) -> bool:
    upper = name.upper()
    return bool(SECRET_ENV_RE.search(upper)) and not POINTER_SUFFIX_RE.search(upper)


def vault_injects(pod: PodTemplate) -> bool:
    return pod.annotations.get(VAULT + "agent-inject") == "true"


def uses_secrets(pod: PodTemplate) -> bool:
    """True when the pod consumes secret files (and so needs Vault to render them)."""
    if any(k.startswith(VAULT + "agent-inject-secret-") for k in pod.annotations):
        return True
    for c in pod.containers():
        for e in c.get("env") or []:
            if isinstance(e, dict) and e.get("name") == "DOCQUERY_SECRETS_DIR":
                return True
        for m in c.get("volumeMounts") or []:
            if isinstance(m, dict) and str(m.get("mountPath", "")).startswith("/vault/secrets"):
                return True
        for arg in list(c.get("args") or []) + list(c.get("command") or []):
            if "/vault/secrets" in str(arg):
                return True
    return False


def projected_token_volumes(pod: PodTemplate) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for v in pod.volumes():
        for src in (v.get("projected") or {}).get("sources") or []:
            if isinstance(src, dict) and "serviceAccountToken" in src:
                out.append((str(v.get("name")), src["serviceAccountToken"] or {}))
    return out


def requests_gpu(pod: PodTemplate) -> bool:
    if pod.spec.get("resourceClaims"):
        return True
    for c in pod.containers():
        res = c.get("resources") or {}
        for section in ("requests", "limits"):
            if any("gpu" in str(k) for k in (res.get(section) or {})):
                return True
    return False


def vllm_serve_argv(container: dict[str, Any]) -> list[str] | None:
    """The argv after ``vllm`` for a container that runs ``vllm serve``, else None.

    ``command: [vllm, serve]`` + args directly; a shell script is split the way the
    shell would (line continuations joined, then shlex words); ``$VARS`` stay literal.
    """
    command = [str(x) for x in container.get("command") or []]
    args = [str(x) for x in container.get("args") or []]
    if command[:1] == ["vllm"]:
        return command[1:] + args
    if command[:1] and command[0].endswith("sh") and args:
        script = args[0].replace("\\\n", " ")
        for line in script.splitlines():
            words = shlex.split(line, comments=True)
            for i in range(len(words) - 1):
                if words[i] == "vllm" and words[i + 1] == "serve":
                    return words[i + 1 :]
    return None
