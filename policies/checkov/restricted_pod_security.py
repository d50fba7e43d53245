"""CKV_DQ_1: every pod meets Pod Security "restricted" with a fixed non-root identity."""

from __future__ import annotations

from typing import Any

from dq_base import DQPodCheck
from dq_podspec import ALLOWED_VOLUME_TYPES, PodTemplate


def _pod_level(pod: PodTemplate) -> list[str]:
    out: list[str] = []
    psc = pod.spec.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True:
        out.append("securityContext.runAsNonRoot must be true at pod level")
    for field in ("runAsUser", "runAsGroup", "fsGroup"):
        value = psc.get(field)
        if not isinstance(value, int) or value <= 0:
            out.append(f"securityContext.{field} must be a fixed non-zero id")
    # Pod level on purpose: injected sidecars (Vault agent) set no seccomp.
    if (psc.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        out.append("securityContext.seccompProfile.type must be RuntimeDefault at pod level")
    out += [f"{field} is not allowed" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.spec.get(field)]
    for v in pod.volumes():
        # checkov adds __startline__/__endline__ keys to every mapping.
        kinds = {k for k in v if not k.startswith("__")} - {"name"}
        if not kinds <= ALLOWED_VOLUME_TYPES:
            out.append(f"volume {v.get('name')}: type {sorted(kinds - ALLOWED_VOLUME_TYPES)} not allowed")
    return out


def _container_level(c: dict[str, Any]) -> list[str]:
    name = c.get("name")
    sc = c.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    problems = {
        "allowPrivilegeEscalation must be false": sc.get("allowPrivilegeEscalation") is not False,
        "privileged is not allowed": bool(sc.get("privileged")),
        "must not run as root": sc.get("runAsUser") == 0 or sc.get("runAsNonRoot") is False,
        "capabilities.drop must include ALL": "ALL" not in (caps.get("drop") or []),
        "capabilities.add may only hold NET_BIND_SERVICE": bool(set(caps.get("add") or []) - {"NET_BIND_SERVICE"}),
        "procMount must be Default": sc.get("procMount") not in (None, "Default"),
        "seccompProfile must be RuntimeDefault or Localhost": (sc.get("seccompProfile") or {}).get("type")
        not in (None, "RuntimeDefault", "Localhost"),
        "hostPort is not allowed": any(isinstance(p, dict) and p.get("hostPort") for p in c.get("ports") or []),
    }
    return [f"container {name}: {msg}" for msg, bad in problems.items() if bad]


class RestrictedPodSecurity(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="Pod meets Pod Security restricted: fixed non-root UID/GID, pod-level seccomp, "
            "drop ALL, no host access",
            id="CKV_DQ_1",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        out = _pod_level(pod)
        for c in pod.containers():
            out += _container_level(c)
        return out


check = RestrictedPodSecurity()
