"""CKV_DQ_12 / CKV_DQ_13: vLLM runs without request logging, dev mode or docs; GPU pods keep host users."""

from __future__ import annotations

from dq_base import DQPodCheck
from dq_podspec import PodTemplate, requests_gpu, vllm_serve_argv


class VllmHardening(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="vLLM: no request logging, no VLLM_SERVER_DEV_MODE, FastAPI docs off, API key only from --config",
            id="CKV_DQ_12",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        out: list[str] = []
        for c in pod.containers():
            if "vllm" not in str(c.get("image", "")):
                continue
            words = " ".join(str(x) for x in list(c.get("command") or []) + list(c.get("args") or []))
            if "--enable-log-requests" in words:
                out.append(f"container {c.get('name')}: request logging must stay off")
            if "--api-key" in words:
                out.append(f"container {c.get('name')}: --api-key on the command line is visible in /proc")
            argv = vllm_serve_argv(c)
            if argv is not None or "vllm serve" in words:
                argv = argv or []
                if "--disable-fastapi-docs" not in argv:
                    out.append(f"container {c.get('name')}: --disable-fastapi-docs missing")
                # vLLM reads the file only for the exact token "--config" followed by the path.
                at = argv.index("--config") if "--config" in argv else -1
                if at < 0 or not argv[at + 1 :][:1] or not argv[at + 1].startswith("/vault/secrets/"):
                    out.append(
                        f"container {c.get('name')}: API key must come from a Vault-rendered file, "
                        "passed as two arguments: --config /vault/secrets/<file>"
                    )
                if any(a.startswith("--config=") for a in argv):
                    out.append(f"container {c.get('name')}: --config=FILE is ignored by vLLM")
            for e in c.get("env") or []:
                if isinstance(e, dict) and e.get("name") in ("VLLM_SERVER_DEV_MODE", "VLLM_API_KEY"):
                    out.append(f"container {c.get('name')}: env {e.get('name')} is not allowed")
        return out


class GpuPodsKeepHostUsers(DQPodCheck):
    def __init__(self) -> None:
        super().__init__(
            name="GPU pods do not set hostUsers: false (NVIDIA toolkit/CDI hooks fail in user namespaces)",
            id="CKV_DQ_13",
        )

    def violations(self, pod: PodTemplate) -> list[str]:
        if requests_gpu(pod) and pod.spec.get("hostUsers") is False:
            return ["GPU pod with hostUsers: false"]
        return []


check = VllmHardening()
check_gpu = GpuPodsKeepHostUsers()
