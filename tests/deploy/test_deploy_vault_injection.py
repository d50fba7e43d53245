"""The policies admit the pods the Vault Agent Injector actually produces.

Admission runs the mutating webhooks (the injector) before the validating ones
(Kyverno), so the policies see the injected pod. The fixture is built by
upstream.inject_vault_agent from what vault-k8s v1.7.6 (commit fbc5b1f0) adds:
agent-inject/agent/agent.go Patch, container_volume.go, container_sidecar.go,
container_init_sidecar.go. The Kyverno rules are evaluated offline by
kyverno_eval.py; the checkov twins run on the same fixture (conftest).
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
import upstream
import yaml
from deploy_support import CheckovRun, Rendering

EVAL = Path(__file__).resolve().parent / "kyverno_eval.py"


def _policies() -> list[dict[str, Any]]:
    out = []
    for path in sorted(ds.KYVERNO_DIR.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            out += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def _evaluate(policy_python: Path, resources: list[dict[str, Any]]) -> list[dict[str, str]]:
    payload = json.dumps({"policies": _policies(), "resources": resources})
    proc = subprocess.run([str(policy_python), str(EVAL)], input=payload, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _failures(results: list[dict[str, str]]) -> list[str]:
    return [f"{r['resource']}: {r['policy']}/{r['rule']}" for r in results if r["result"] == "fail"]


@pytest.fixture(scope="module")
def injected(renderings: dict[str, Rendering]) -> list[dict[str, Any]]:
    return _injected_pods(renderings)


def _injected_pods(renderings: dict[str, Rendering]) -> list[dict[str, Any]]:
    pods: dict[str, dict[str, Any]] = {}
    for name in ("overlay-prod", "overlay-dev", "component-multinode-vllm", "component-embed-server"):
        for w in ds.workloads(renderings[name].docs):
            if w.name not in pods:
                template = {"metadata": w.pod.metadata, "spec": w.pod.spec}
                pods[w.name] = upstream.inject_vault_agent(w.name, template, ds.NAMESPACE)
    return list(pods.values())


def test_the_fixture_is_what_the_injector_adds(injected: list[dict[str, Any]]) -> None:
    by_name = {p["metadata"]["name"]: p for p in injected}
    query = by_name["docquery-query-injected"]["spec"]
    assert [c["name"] for c in query["containers"]][-1] == "vault-agent"
    assert [c["name"] for c in query["initContainers"]] == ["vault-agent-init"]
    assert {"vault-secrets", "home-init", "home-sidecar"} <= {v["name"] for v in query["volumes"]}
    ingest = by_name["docquery-ingest-injected"]["spec"]  # pre-populate-only: no sidecar, no home-sidecar
    assert "vault-agent" not in [c["name"] for c in ingest["containers"]]
    assert "home-sidecar" not in {v["name"] for v in ingest["volumes"]}
    worker = by_name["docquery-vllm-lws-worker-injected"]["spec"]  # no agent-inject: untouched
    assert not worker.get("initContainers")


def test_policies_name_exactly_what_the_injector_adds() -> None:
    assert set(ds.dq_podspec.INJECTOR_VOLUMES) == set(upstream.INJECTED_VOLUMES)
    assert set(ds.dq_podspec.INJECTOR_CONTAINERS) == set(upstream.INJECTED_CONTAINERS)
    text = (ds.KYVERNO_DIR / "readonly-rootfs.yaml").read_text()
    assert all(f'\\"{v}\\"' in text for v in upstream.INJECTED_VOLUMES)


def test_kyverno_admits_every_injected_pod(policy_python: Path, injected: list[dict[str, Any]]) -> None:
    results = _evaluate(policy_python, injected)
    assert not _failures(results), "\n".join(_failures(results))
    # The rules that must have looked at the injected containers and volumes did run.
    ran = {(r["policy"], r["rule"]) for r in results if r["result"] == "pass"}
    for rule in (
        ("docquery-require-image-digest", "image-digest"),
        ("docquery-readonly-rootfs", "emptydir-size-limit"),
        ("docquery-require-resources", "requests-and-limits"),
        ("docquery-vault-annotations", "vault-agent-complete"),
    ):
        assert rule in ran, rule


def _mutated(injected: list[dict[str, Any]], how: str) -> dict[str, Any]:
    pod = copy.deepcopy(next(p for p in injected if p["metadata"]["name"] == "docquery-query-injected"))
    a = pod["metadata"]["annotations"]
    if how == "agent image left to the injector's default tag":
        # Re-inject from the un-injected template, now without the pin.
        src = next(p for p in injected if p["metadata"]["name"] == "docquery-query-injected")
        template = {"metadata": copy.deepcopy(src["metadata"]), "spec": copy.deepcopy(src["spec"])}
        template["metadata"]["annotations"].pop("vault.hashicorp.com/agent-image")
        spec = template["spec"]
        for key in ("containers", "initContainers"):
            spec[key] = [c for c in spec.get(key) or [] if c["name"] not in upstream.INJECTED_CONTAINERS]
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in upstream.INJECTED_VOLUMES]
        for c in template["spec"]["containers"]:
            c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "vault-secrets"]
        pod = upstream.inject_vault_agent("docquery-query", template, ds.NAMESPACE)
    elif how == "an unbounded scratch emptyDir of the app":
        pod["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    elif how == "an unbounded disk emptyDir named like the injector's":
        next(v for v in pod["spec"]["volumes"] if v["name"] == "vault-secrets")["emptyDir"].pop("medium")
    elif how == "injector-named volume in a pod without injection":
        a["vault.hashicorp.com/agent-inject"] = "false"
    elif how == "agent without limits":
        pod["spec"]["containers"][-1]["resources"].pop("limits")
    else:
        raise AssertionError(how)
    pod["metadata"]["name"] = how.replace(" ", "-").replace("'", "")
    return pod


def _vllm_single_token_config(injected: list[dict[str, Any]]) -> dict[str, Any]:
    pod = copy.deepcopy(next(p for p in injected if p["metadata"]["name"] == "docquery-vllm-injected"))
    c = pod["spec"]["containers"][0]
    c["args"] = [a for a in c["args"] if a not in ("--config", "/vault/secrets/vllm-config.yaml")]
    c["args"].append("--config=/vault/secrets/vllm-config.yaml")
    pod["metadata"]["name"] = "vllm-config-as-one-token"
    return pod


def test_kyverno_refuses_the_single_token_config_form(policy_python: Path, injected: list[dict[str, Any]]) -> None:
    failures = _failures(_evaluate(policy_python, [_vllm_single_token_config(injected)]))
    assert "vllm-config-as-one-token: docquery-vllm-hardening/vllm-no-request-logging-or-dev-mode" in failures


BAD = {
    "agent image left to the injector's default tag": "docquery-require-image-digest/image-digest",
    "an unbounded scratch emptyDir of the app": "docquery-readonly-rootfs/emptydir-size-limit",
    "an unbounded disk emptyDir named like the injector's": "docquery-readonly-rootfs/emptydir-size-limit",
    "injector-named volume in a pod without injection": "docquery-readonly-rootfs/emptydir-size-limit",
    "agent without limits": "docquery-require-resources/requests-and-limits",
}


@pytest.mark.parametrize("how", sorted(BAD))
def test_kyverno_still_refuses_what_the_exemptions_do_not_cover(
    policy_python: Path, injected: list[dict[str, Any]], how: str
) -> None:
    pod = _mutated(injected, how)
    failures = _failures(_evaluate(policy_python, [pod]))
    assert f"{pod['metadata']['name']}: {BAD[how]}" in failures, failures


def test_checkov_rules_pass_on_the_injected_pods(checkov_runs: dict[str, CheckovRun]) -> None:
    run = checkov_runs["injected"]
    dq_failed = [r for r in run.results("failed") if "_DQ_" in r["check_id"]]
    assert not dq_failed, "\n".join(f"{r['check_id']} {r['resource']}" for r in dq_failed)
    assert {r["check_id"] for r in run.results("passed")} >= {"CKV_DQ_1", "CKV_DQ_2", "CKV_DQ_3", "CKV_DQ_5"}
