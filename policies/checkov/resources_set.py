"""CKV_DQ_3: CPU and memory requests and limits on every container."""

from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import PodTemplate


class ResourcesSet(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(name="Every container sets CPU and memory requests and limits", id="CKV_DQ_3")

    def violations(self, pod: PodTemplate) -> list[str]:
        out: list[str] = []
        for c in pod.containers():
            res = c.get("resources") or {}
            for section in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if not (res.get(section) or {}).get(resource):
                        out.append(f"container {c.get('name')}: resources.{section}.{resource} missing")
        return out


check = ResourcesSet()
