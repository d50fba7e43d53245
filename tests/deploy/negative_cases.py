"""Known-bad variants of good rendered resources: each must fail its named rule.

They prove that every custom checkov rule can fail (a rule that never fails
proves nothing) and they run in a checkov invocation of their own, in a
namespace with no NetworkPolicy at all.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

EXPECT = "docquery.io/expect-fail"
BAD_NS = "negative-cases"

Mutation = Callable[[dict[str, Any]], None]


def _pod(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["template"]["spec"]


def _annotations(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["template"]["metadata"].setdefault("annotations", {})


def _c0(d: dict[str, Any]) -> dict[str, Any]:
    return _pod(d)["containers"][0]


# (check id, source kind, source name, what goes wrong)
CASES: list[tuple[str, str, str, Mutation]] = [
    ("CKV_DQ_1", "Deployment", "docquery-query", lambda d: _pod(d)["securityContext"].pop("seccompProfile")),
    ("CKV_DQ_1", "Deployment", "docquery-query", lambda d: _pod(d)["securityContext"].update(runAsUser=0)),
    ("CKV_DQ_1", "Deployment", "docquery-query", lambda d: _pod(d).update(hostNetwork=True)),
    (
        "CKV_DQ_1",
        "Deployment",
        "docquery-query",
        lambda d: _pod(d)["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
    ),
    (
        "CKV_DQ_1",
        "Deployment",
        "docquery-query",
        lambda d: _c0(d)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
    ),
    ("CKV_DQ_1", "Deployment", "docquery-query", lambda d: _c0(d)["securityContext"].pop("allowPrivilegeEscalation")),
    (
        "CKV_DQ_2",
        "Deployment",
        "docquery-query",
        lambda d: _c0(d)["securityContext"].update(readOnlyRootFilesystem=False),
    ),
    ("CKV_DQ_3", "Deployment", "docquery-query", lambda d: _c0(d)["resources"].pop("limits")),
    (
        "CKV_DQ_4",
        "Deployment",
        "docquery-query",
        lambda d: _c0(d)["env"].append({"name": "DOCQUERY_LLM__API_KEY", "value": "sk-test"}),
    ),
    (
        "CKV_DQ_4",
        "Deployment",
        "docquery-query",
        lambda d: _c0(d)["env"].append({"name": "UPSTREAM", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}),
    ),
    ("CKV_DQ_4", "Deployment", "docquery-query", lambda d: _c0(d)["envFrom"].append({"secretRef": {"name": "s"}})),
    ("CKV_DQ_5", "Deployment", "docquery-query", lambda d: _c0(d).update(image="docquery:latest")),
    ("CKV_DQ_6", "Deployment", "docquery-query", lambda d: _annotations(d).pop("vault.hashicorp.com/role")),
    (
        "CKV_DQ_6",
        "Deployment",
        "docquery-query",
        lambda d: _annotations(d).update({"vault.hashicorp.com/agent-inject": "false"}),
    ),
    (
        "CKV_DQ_6",
        "Job",
        "docquery-ingest",
        lambda d: _annotations(d).pop("vault.hashicorp.com/agent-pre-populate-only"),
    ),
    (
        "CKV_DQ_6",
        "Deployment",
        "docquery-query",
        lambda d: _annotations(d).pop("vault.hashicorp.com/agent-image"),
    ),
    ("CKV_DQ_7", "Deployment", "docquery-query", lambda d: _pod(d).update(automountServiceAccountToken=True)),
    (
        "CKV_DQ_7",
        "Deployment",
        "docquery-query",
        lambda d: _pod(d)["volumes"][-1]["projected"]["sources"][0]["serviceAccountToken"].update(
            audience="https://kubernetes.default.svc"
        ),
    ),
    ("CKV_DQ_8", "ServiceAccount", "docquery-query", lambda d: d.update(automountServiceAccountToken=True)),
    (
        "CKV_DQ_9",
        "NetworkPolicy",
        "docquery-query",
        lambda d: d["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}),
    ),
    (
        "CKV_DQ_9",
        "NetworkPolicy",
        "docquery-query",
        lambda d: d["spec"]["egress"].append({"ports": [{"protocol": "TCP", "port": 443}]}),
    ),
    (
        "CKV_DQ_10",
        "NetworkPolicy",
        "docquery-query",
        lambda d: d["spec"]["egress"].append(
            {"to": [{"namespaceSelector": {}}], "ports": [{"protocol": "UDP", "port": 53}]}
        ),
    ),
    ("CKV_DQ_11", "Namespace", "docquery", lambda d: d["metadata"]["labels"].pop("pod-security.kubernetes.io/enforce")),
    ("CKV_DQ_12", "Deployment", "docquery-vllm", lambda d: _c0(d)["args"].append("--enable-log-requests")),
    (
        "CKV_DQ_12",
        "Deployment",
        "docquery-vllm",
        lambda d: _c0(d)["env"].append({"name": "VLLM_SERVER_DEV_MODE", "value": "1"}),
    ),
    (
        "CKV_DQ_12",
        "Deployment",
        "docquery-vllm",
        lambda d: _c0(d).update(
            args=[a for a in _c0(d)["args"] if a not in ("--config", "/vault/secrets/vllm-config.yaml")]
            + ["--config=/vault/secrets/vllm-config.yaml"]
        ),
    ),
    ("CKV_DQ_13", "Deployment", "docquery-vllm-embed", lambda d: _pod(d).update(hostUsers=False)),
    # A pod that no NetworkPolicy selects (its namespace has none).
    ("CKV2_DQ_1", "Pod", "", lambda d: None),
]


def _bare_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    query = next(d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == "docquery-query")
    template = copy.deepcopy(query["spec"]["template"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}


def build(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, (check_id, kind, name, mutate) in enumerate(CASES):
        if kind == "Pod":
            bad = _bare_pod(docs)
            bad["metadata"]["labels"] = {"app.kubernetes.io/name": f"uncovered-{i}"}
        else:
            src = next(d for d in docs if d.get("kind") == kind and d["metadata"]["name"] == name)
            bad = copy.deepcopy(src)
            mutate(bad)
        meta = bad["metadata"]
        meta["name"] = f"bad-{i}-{check_id.lower().replace('_', '-')}"
        if kind != "Namespace":
            meta["namespace"] = BAD_NS
        # Policies must not select the bad pods (or each other's pods) by accident.
        if kind == "NetworkPolicy":
            bad["spec"]["podSelector"] = {"matchLabels": {"negative-case": str(i)}}
        meta.setdefault("annotations", {})[EXPECT] = check_id
        out.append(bad)
    return out


def expected() -> dict[str, str]:
    """resource name -> check id it must fail."""
    return {f"bad-{i}-{cid.lower().replace('_', '-')}": cid for i, (cid, *_rest) in enumerate(CASES)}


INJECTED_NS = "injected-fixture"
INJECTED_LABEL = "docquery.io/injected-fixture"


def injected_fixture(renderings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Vault-injecting pod of the bundle as the injector leaves it (upstream.py)."""
    import deploy_support as ds
    import upstream

    out: list[dict[str, Any]] = [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-all", "namespace": INJECTED_NS},
            # Selects the fixture pods by label only: checkov's graph links policies to pods
            # across all files of a run, and the negative case's pod must stay uncovered.
            "spec": {"podSelector": {"matchLabels": {INJECTED_LABEL: "true"}}, "policyTypes": ["Ingress", "Egress"]},
        }
    ]
    seen: set[str] = set()
    for name in ("overlay-prod", "overlay-dev", "component-multinode-vllm", "component-embed-server"):
        for w in ds.workloads(renderings[name].docs):
            if w.name in seen:
                continue
            seen.add(w.name)
            pod = upstream.inject_vault_agent(w.name, {"metadata": w.pod.metadata, "spec": w.pod.spec}, INJECTED_NS)
            pod["metadata"]["labels"] = {**(pod["metadata"].get("labels") or {}), INJECTED_LABEL: "true"}
            out.append(pod)
    return out
