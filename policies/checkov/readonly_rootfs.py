"""CKV_DQ_2: read-only root filesystem everywhere, with an emptyDir for scratch."""

from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import INJECTOR_VOLUMES, PodTemplate, vault_injects


class ReadOnlyRootWithScratch(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="Containers use a read-only root filesystem and write only to emptyDir scratch",
            id="CKV_DQ_2",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        out: list[str] = []
        empty_dirs = {v.get("name") for v in pod.volumes() if "emptyDir" in v}
        for c in pod.containers():
            name = c.get("name")
            if (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is not True:
                out.append(f"container {name}: readOnlyRootFilesystem must be true")
            mounts = [m for m in c.get("volumeMounts") or [] if isinstance(m, dict)]
            if not any(m.get("name") in empty_dirs and not m.get("readOnly") for m in mounts):
                out.append(f"container {name}: needs a writable emptyDir (e.g. /tmp) for scratch")
        for v in pod.volumes():
            empty_dir = v.get("emptyDir")
            if "emptyDir" not in v or (empty_dir or {}).get("sizeLimit"):
                continue
            # The Vault injector's own Memory volumes carry no sizeLimit; the agent's memory limit bounds them.
            injected = vault_injects(pod) and v.get("name") in INJECTOR_VOLUMES
            if not (injected and (empty_dir or {}).get("medium") == "Memory"):
                out.append(f"volume {v.get('name')}: emptyDir needs a sizeLimit")
        return out


check = ReadOnlyRootWithScratch()
