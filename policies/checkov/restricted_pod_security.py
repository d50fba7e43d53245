"""CKV_DQ_1: every pod meets Pod Security "restricted" with a fixed non-root identity."""
from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import ALLOWED_VOLUME_TYPES, PodTemplate


class RestrictedPodSecurity(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="Pod meets Pod Security restricted: fixed non-root UID/GID, pod-level seccomp, drop ALL, no host access",
            id="CKV_DQ_1",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
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
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.spec.get(field):
                out.append(f"{field} is not allowed")
        for v in pod.volumes():
            # checkov adds __startline__/__endline__ keys to every mapping.
            kinds = {k for k in v if not k.startswith("__")} - {"name"}
            if not kinds <= ALLOWED_VOLUME_TYPES:
                out.append(f"volume {v.get('name')}: type {sorted(kinds - ALLOWED_VOLUME_TYPES)} not allowed")
        for c in pod.containers():
            name = c.get("name")
            sc = c.get("securityContext") or {}
            if sc.get("allowPrivilegeEscalation") is not False:
                out.append(f"container {name}: allowPrivilegeEscalation must be false")
            if sc.get("privileged"):
                out.append(f"container {name}: privileged is not allowed")
            if sc.get("runAsUser") == 0 or sc.get("runAsNonRoot") is False:
                out.append(f"container {name}: must not run as root")
            caps = sc.get("capabilities") or {}
            if "ALL" not in (caps.get("drop") or []):
                out.append(f"container {name}: capabilities.drop must include ALL")
            extra = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
            if extra:
                out.append(f"container {name}: capabilities.add {sorted(extra)} not allowed")
            if sc.get("procMount") not in (None, "Default"):
                out.append(f"container {name}: procMount must be Default")
            seccomp = (sc.get("seccompProfile") or {}).get("type")
            if seccomp not in (None, "RuntimeDefault", "Localhost"):
                out.append(f"container {name}: seccompProfile {seccomp} not allowed")
            for port in c.get("ports") or []:
                if isinstance(port, dict) and port.get("hostPort"):
                    out.append(f"container {name}: hostPort is not allowed")
        return out


check = RestrictedPodSecurity()
