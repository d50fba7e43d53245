"""What a re-apply and the schedulers do with the overlays.

- HorizontalPodAutoscaler (autoscaling/v2): the HPA controller writes the scale
  subresource; `kubectl apply` of an object that still sets spec.replicas writes it
  back, so what is re-applied must not set it for an HPA's target.
- A Job in the re-applied overlay is re-created after ttlSecondsAfterFinished removed
  it, i.e. a full ingest on every apply: the Job lives in overlays/<o>/ingest only.
- podFailurePolicy (batch/v1, Job API): FailIndex on the CLI's usage/config exit code.
- GPUs: the NVIDIA DRA driver refuses to run beside the device plugin on a node, and
  GPU Operator's two modes exclude each other: one mechanism per rendering.
"""

from __future__ import annotations

from pathlib import Path

import deploy_support as ds
import yaml
from deploy_support import Rendering

INGEST_EXIT_CODES = {"ok": 0, "some_failed": 1, "usage": 2}  # ingest/cli.py EXIT_OK, EXIT_FAILED, EXIT_USAGE


def _targets(r: Rendering) -> list[tuple[str, str]]:
    return [
        (h["spec"]["scaleTargetRef"]["kind"], h["spec"]["scaleTargetRef"]["name"])
        for h in r.of_kind("HorizontalPodAutoscaler")
    ]


def test_no_replicas_where_an_hpa_scales(renderings: dict[str, Rendering]) -> None:
    checked = 0
    for r in renderings.values():
        for kind, name in _targets(r):
            target = r.get(kind, name)
            assert "replicas" not in target["spec"], f"{r.name}: {kind}/{name} sets replicas under an HPA"
            checked += 1
    assert checked >= 4  # component-autoscaling and prod, two HPAs each


def test_overlays_apply_no_job(kubectl: Path, workdir: Path) -> None:
    for name in ds.overlay_names():
        docs = ds.load_docs(ds.render(kubectl, ds.K8S / "overlays" / name))
        assert not [d for d in docs if d["kind"] in ("Job", "CronJob")], name
        ingest = ds.ingest_dir(f"overlay-{name}")
        assert ingest is not None, f"overlays/{name}/ingest missing"
        run = ds.load_docs(ds.render(kubectl, ingest))
        # Only the Job: applying the ingest run changes nothing that lives on.
        assert [(d["kind"], d["metadata"]["name"]) for d in run] == [("Job", "docquery-ingest")], name


def test_ingest_run_uses_the_embed_server_exactly_when_the_overlay_does() -> None:
    for name in ds.overlay_names():
        overlay = yaml.safe_load((ds.K8S / "overlays" / name / "kustomization.yaml").read_text())
        ingest = yaml.safe_load((ds.K8S / "overlays" / name / "ingest" / "kustomization.yaml").read_text())
        uses = any(c.endswith("/embed-server") for c in overlay.get("components", []))
        assert uses == any(c.endswith("/embed-server-ingest") for c in ingest.get("components", [])), name
        userns = any(c.endswith("/userns") for c in overlay.get("components", []))
        assert userns == any(c.endswith("/userns") for c in ingest.get("components", [])), name


def test_pod_failure_policy_matches_the_cli_exit_codes(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        spec = r.get("Job", "docquery-ingest")["spec"]
        assert spec["template"]["spec"]["restartPolicy"] == "Never"  # required by podFailurePolicy
        assert spec["backoffLimitPerIndex"] >= 1  # FailIndex needs per-index backoff
        rules = spec["podFailurePolicy"]["rules"]
        by_code: dict[int, str] = {}
        for rule in rules:
            codes = rule.get("onExitCodes")
            if codes:
                assert codes["containerName"] == "ingest" and codes["operator"] == "In"
                by_code |= dict.fromkeys(codes["values"], rule["action"])
        assert by_code.get(INGEST_EXIT_CODES["usage"]) == "FailIndex", r.name
        # 1 (some files failed, a re-run converges) is retried: counted, not failed at once.
        assert INGEST_EXIT_CODES["some_failed"] not in by_code, r.name
        assert INGEST_EXIT_CODES["ok"] not in by_code
        disruption = [x for x in rules if {"type": "DisruptionTarget"} in (x.get("onPodConditions") or [])]
        assert disruption and disruption[0]["action"] == "Ignore"


def test_one_gpu_mechanism_per_rendering(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        kinds = set()
        for w in ds.workloads(r.docs):
            if w.pod.spec.get("resourceClaims"):
                kinds.add("dra")
            for c in w.pod.containers():
                res = c.get("resources") or {}
                if "nvidia.com/gpu" in {**(res.get("requests") or {}), **(res.get("limits") or {})}:
                    kinds.add("device-plugin")
        assert len(kinds) <= 1, f"{r.name} mixes GPU allocation mechanisms: {sorted(kinds)}"
    assert renderings["overlay-prod"].get("Deployment", "docquery-vllm-embed")["spec"]["template"]["spec"][
        "resourceClaims"
    ]


def test_readme_names_the_dra_driver_and_versions() -> None:
    readme = (ds.K8S / "README.md").read_text()
    for needle in ("DRAExtendedResource", "extendedResourceName", "NVIDIA DRA Driver for GPUs", "GPU Operator"):
        assert needle in readme, needle
