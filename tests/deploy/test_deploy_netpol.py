"""Network policy: the nca connectivity map equals the README flow table, both ways.

Plus the structural rules nca cannot state: every pod is governed for Ingress
AND Egress, nothing reaches the whole Internet, and DNS goes to kube-dns only.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import deploy_support as ds
import pytest
import yaml
from deploy_support import Rendering


def _run_nca(nca: Path, rendering: Rendering, workdir: Path) -> str:
    d = workdir / "nca" / rendering.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "bundle.yaml").write_text(yaml.safe_dump_all(ds.nca_input(rendering.docs)))
    (d / "external-peers.yaml").write_text((ds.FIXTURES / "external-peers.yaml").read_text())
    out = d / "connectivity.txt"
    # No kubeconfig: without one nca can never fall back to a live cluster.
    env = dict(os.environ, KUBECONFIG="/nonexistent")
    proc = subprocess.run(
        [
            str(nca),
            "--connectivity",
            "-r",
            str(d),
            "-o",
            "txt_no_fw_rules",
            "-f",
            str(out),
            "--output_endpoints",
            "pods",
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=d,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Skipping" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return out.read_text()


@pytest.mark.parametrize("name", sorted(ds.FLOW_COLUMNS))
def test_connectivity_equals_flow_table(
    nca_bin: Path, renderings: dict[str, Rendering], flow_rows: list[dict[str, str]], workdir: Path, name: str
) -> None:
    rendering = renderings[name]
    actual = ds.parse_nca(_run_nca(nca_bin, rendering, workdir))
    ours = {w.name for w in ds.workloads(rendering.docs) if w.namespace == ds.NAMESPACE}
    expected = ds.expected_flows(flow_rows, ds.FLOW_COLUMNS[name], ours)
    extra = sorted(map(str, actual - expected))
    missing = sorted(map(str, expected - actual))
    assert not extra and not missing, (
        f"flows allowed but not in deploy/k8s/README.md: {extra}\nflows in the README but not allowed: {missing}"
    )
    assert len(actual) >= 10


def test_flow_table_is_well_formed(flow_rows: list[dict[str, str]]) -> None:
    assert flow_rows
    for row in flow_rows:
        assert row["enforced by"] in ("NetworkPolicy", "cilium"), row
        for col in ds.FLOW_COLUMNS.values():
            assert row[col] in ("yes", "no"), row
        ds._ports(row["ports"])  # parses


@pytest.mark.parametrize("name", sorted(ds.combos()))
def test_every_pod_is_governed_for_ingress_and_egress(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    for w in ds.workloads(r.docs):
        assert ds.coverage(r.docs, w) == {"Ingress", "Egress"}, (name, w.name)
    default_deny = [
        np
        for np in r.of_kind("NetworkPolicy")
        if np["spec"]["podSelector"] == {}
        and ds.policy_types(np) == {"Ingress", "Egress"}
        and not np["spec"].get("ingress")
        and not np["spec"].get("egress")
    ]
    assert default_deny, "namespace default-deny missing"


@pytest.mark.parametrize("name", sorted(ds.combos()))
def test_no_world_egress_and_dns_to_kube_dns_only(renderings: dict[str, Rendering], name: str) -> None:
    for np in renderings[name].of_kind("NetworkPolicy"):
        assert not ds.world_egress(np), (np["metadata"]["name"], ds.world_egress(np))
        for rule in np["spec"].get("egress") or []:
            if any(p.get("port") == 53 for p in rule.get("ports") or []):
                assert rule["to"] == [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ]
                assert {(p["protocol"], p["port"]) for p in rule["ports"]} == {("UDP", 53), ("TCP", 53)}


def test_vllm_admits_only_query_pods_and_metrics(renderings: dict[str, Rendering]) -> None:
    np = renderings["overlay-prod"].get("NetworkPolicy", "docquery-vllm")
    sources = [
        (peer, tuple(p["port"] for p in rule["ports"])) for rule in np["spec"]["ingress"] for peer in rule["from"]
    ]
    assert sources == [
        ({"podSelector": {"matchLabels": {"app.kubernetes.io/name": "docquery-query"}}}, (8000,)),
        (
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            },
            (9400,),
        ),
    ]


def test_nca_parser_reads_its_formats() -> None:
    text = (
        "docquery/docquery-query-1 => docquery/docquery-qdrant-2 : {protocols:TCP,dst_ports:6333}\n"
        "docquery/docquery-ingest-1 => kube-system/kube-dns-0 : {protocols:TCP, UDP,dst_ports:53}\n"
        "docquery/docquery-vllm-1 => docquery/docquery-vllm-worker-2 : All connections\n"
        "vault/vault-0 => kube-system/kube-dns-0 : All connections\n"
        "docquery/docquery-query-1 => 0.0.0.0-255.255.255.255 : {protocols:TCP,dst_ports:443}\n"
    )
    assert ds.parse_nca(text) == {
        ds.Flow("docquery-query", "docquery-qdrant", "TCP", "6333"),
        ds.Flow("docquery-ingest", "kube-system/kube-dns", "TCP", "53"),
        ds.Flow("docquery-ingest", "kube-system/kube-dns", "UDP", "53"),
        ds.Flow("docquery-vllm", "docquery-vllm-worker", "ALL", "*"),
        ds.Flow("docquery-query", "0.0.0.0-255.255.255.255", "TCP", "443"),
    }
