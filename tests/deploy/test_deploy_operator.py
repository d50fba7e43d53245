"""Operator components: the Vault CA on every injected template, Vault outside the
cluster, and every HPA metric with its source in the same overlay."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
import upstream
import yaml
from deploy_support import Rendering

VAULT = "vault.hashicorp.com/"
METRICS = yaml.safe_load((Path(__file__).parent / "facts" / "metrics.yaml").read_text())


@pytest.fixture(scope="module")
def with_ca(kubectl: Path, workdir: Path) -> dict[str, list[dict[str, Any]]]:
    """vault-ca after the components that add injected workloads, as the README says."""
    out = {}
    for name, components in {
        "multinode": ["multinode-vllm", "vault-ca"],
        "backup": ["qdrant-cluster", "qdrant-backup", "vault-ca"],
    }.items():
        d = workdir / "operator" / name
        d.mkdir(parents=True, exist_ok=True)
        rel = [os.path.relpath(ds.K8S / "components" / c, d) for c in [*components, "release-images"]]
        k = {"resources": [os.path.relpath(ds.K8S / "base", d)], "components": rel}
        (d / "kustomization.yaml").write_text(yaml.safe_dump({"kind": "Kustomization", **k}))
        out[name] = ds.load_docs(ds.render(kubectl, d))
    return out


def _injected(docs: list[dict[str, Any]]) -> list[ds.Workload]:
    return [w for w in ds.workloads(docs) if w.pod.annotations.get(VAULT + "agent-inject") == "true"]


def test_every_injected_template_trusts_the_vault_ca(
    renderings: dict[str, Rendering], with_ca: dict[str, list[dict[str, Any]]]
) -> None:
    sets = {"overlay-prod": renderings["overlay-prod"].docs, **with_ca}
    seen = set()
    for name, docs in sets.items():
        for w in _injected(docs):
            a = w.pod.annotations
            assert a.get(VAULT + "tls-secret") == "vault-ca", (name, w.name)
            assert a.get(VAULT + "ca-cert") == f"{upstream.TLS_MOUNT}/ca.crt", (name, w.name)
            seen.add(w.name)
            # What the injector makes of it: the Secret mounted in the agents only.
            pod = upstream.inject_vault_agent(w.name, {"metadata": w.pod.metadata, "spec": w.pod.spec}, "x")
            vols = {v["name"]: v for v in pod["spec"]["volumes"]}
            assert vols[upstream.TLS_VOLUME] == {"name": upstream.TLS_VOLUME, "secret": {"secretName": "vault-ca"}}
            for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
                mounted = any(m["name"] == upstream.TLS_VOLUME for m in c.get("volumeMounts") or [])
                assert mounted == (c["name"] in upstream.INJECTED_CONTAINERS), (w.name, c["name"])
    # The LWS leader and the backup CronJob included; the worker holds no secret.
    assert {"docquery-vllm-lws", "docquery-qdrant-backup", "docquery-ingest", "docquery-vllm-embed"} <= seen
    assert not any(w.name == "docquery-vllm-lws-worker" for docs in with_ca.values() for w in _injected(docs))


def _egress_to(docs: list[dict[str, Any]], labels: dict[str, str], ip: str, port: int) -> bool:
    addr = ipaddress.ip_address(ip)
    for np in docs:
        if np.get("kind") != "NetworkPolicy" or "Egress" not in ds.policy_types(np):
            continue
        if not ds.selector_matches(np["spec"].get("podSelector", {}), labels):
            continue
        for rule in np["spec"].get("egress") or []:
            ports = rule.get("ports") or [{"port": port}]
            if not any(p.get("port") == port for p in ports):
                continue
            for peer in rule.get("to") or []:
                cidr = (peer.get("ipBlock") or {}).get("cidr")
                if cidr and addr in ipaddress.ip_network(cidr):
                    return True
    return False


def test_vault_external_reaches_vault_from_every_agent_and_nothing_else(renderings: dict[str, Rendering]) -> None:
    r = renderings["component-vault-external"]
    np = r.get("NetworkPolicy", "docquery-vault-external")
    [rule] = np["spec"]["egress"]
    cidr = rule["to"][0]["ipBlock"]["cidr"]
    assert ipaddress.ip_network(cidr).prefixlen >= 24, "a Vault address, not a range of the Internet"
    ip = str(next(iter(ipaddress.ip_network(cidr))))
    for w in ds.workloads(r.docs):
        injected = w.pod.annotations.get(VAULT + "agent-inject") == "true"
        assert _egress_to(r.docs, w.labels, ip, 8200) == injected, w.name
    # Every workload that can be injected in any rendering is in its selector.
    names = {w.labels["app.kubernetes.io/name"] for x in renderings.values() for w in _injected(x.docs)}
    assert names <= set(np["spec"]["podSelector"]["matchExpressions"][0]["values"])


def _serves(w: ds.Workload, metric: str, selector: dict[str, str]) -> bool:
    """Does a pod of w produce `metric` with these labels? Only vLLM metrics are external here."""
    if not metric.startswith(METRICS["vllm"]["prefix"]):
        return False
    for c in w.pod.containers():
        argv = upstream.vllm_argv(c)
        if argv is None:
            continue
        names = [a.split("=", 1)[1] for a in argv if a.startswith("--served-model-name=")]
        if selector.get(METRICS["vllm"]["model_label"]) in names[:1]:
            return True
    return False


def metric_sources_missing(docs: list[dict[str, Any]]) -> list[str]:
    """Each HPA metric must come from something in the same rendering: a scraped pod for an
    External metric, CPU requests on every container for a Resource utilization target."""
    missing = []
    work = list(ds.workloads(docs))
    monitors = [d for d in docs if d.get("kind") == "PodMonitor"]
    for hpa in (d for d in docs if d.get("kind") == "HorizontalPodAutoscaler"):
        name = hpa["metadata"]["name"]
        ref = hpa["spec"]["scaleTargetRef"]
        for m in hpa["spec"].get("metrics") or []:
            if m["type"] == "Resource":
                target = next(w for w in work if (w.kind, w.name) == (ref["kind"], ref["name"]))
                res = m["resource"]["name"]
                if any(res not in ((c.get("resources") or {}).get("requests") or {}) for c in target.pod.containers()):
                    missing.append(f"HPA {name}: a container of {ref['name']} has no {res} request")
            elif m["type"] == "External":
                metric = m["external"]["metric"]
                sel = (metric.get("selector") or {}).get("matchLabels") or {}
                scraped = [
                    w
                    for w in work
                    for pm in monitors
                    if ds.selector_matches(pm["spec"]["selector"], w.labels)
                    and {e["port"] for e in pm["spec"]["podMetricsEndpoints"]}
                    <= {p.get("name") for c in w.pod.containers() for p in c.get("ports") or []}
                ]
                if not any(_serves(w, metric["name"], sel) for w in scraped):
                    missing.append(f"HPA {name}: nothing in this rendering scrapes {metric['name']} {sel}")
            else:
                missing.append(f"HPA {name}: metric type {m['type']} not checked")
    return missing


@pytest.mark.parametrize("name", [n for n in sorted(ds.combos()) if n.startswith("overlay-")])
def test_every_hpa_metric_has_its_source_in_the_overlay(renderings: dict[str, Rendering], name: str) -> None:
    assert metric_sources_missing(renderings[name].docs) == []


def test_without_monitoring_the_vllm_metric_has_no_source(renderings: dict[str, Rendering]) -> None:
    docs = [d for d in renderings["overlay-prod"].docs if d.get("kind") != "PodMonitor"]
    assert metric_sources_missing(docs) == [
        "HPA docquery-vllm: nothing in this rendering scrapes vllm:num_requests_waiting "
        "{'model_name': 'docquery-llm', 'namespace': 'docquery'}"
    ]
    # The autoscaling component alone (what prod was before it took monitoring) lacks it too.
    assert metric_sources_missing(renderings["component-autoscaling"].docs)
