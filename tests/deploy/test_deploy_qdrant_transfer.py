"""Qdrant's shard transfers get through the NetworkPolicies: a peer that comes back empty heals.

Which port each transfer method uses, and which method Qdrant picks, is read from
Qdrant's source into facts/qdrant-transfer.yaml (tag, commit and path:line there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
import upstream
import yaml
from deploy_support import Rendering

FACTS = yaml.safe_load((Path(__file__).parent / "facts" / "qdrant-transfer.yaml").read_text())
CLUSTERED = ("component-qdrant-cluster", "overlay-prod")
TEMPLATE = "vault.hashicorp.com/agent-inject-template-qdrant-config.yaml"
SECRETS = {"secret/data/docquery/qdrant/config": {"api_key": "k", "read_only_api_key": "r"}}


def qdrant_config(rendering: Rendering) -> dict[str, Any]:
    """The config file the Vault agent renders for Qdrant (the pod's --config-path)."""
    sts = rendering.get("StatefulSet", "docquery-qdrant")
    template = sts["spec"]["template"]["metadata"]["annotations"][TEMPLATE]
    return yaml.safe_load(upstream.render_agent_template(template, SECRETS))


def transfer_methods(config: dict[str, Any], prevent_unoptimized: bool = False) -> set[str]:
    """Every method Qdrant may use for this cluster: automatic recovery, a request without
    a method, and the fallback after a failed WAL-delta transfer."""
    sel = FACTS["selection"]
    configured = (config.get("storage") or {}).get("shard_transfer_method")
    if configured is None:
        methods = set(sel["automatic_unset"]) | set(sel["requested_unset"])
    else:
        assert configured in FACTS["methods"], f"Qdrant does not know transfer method {configured!r}"
        methods = {configured}
    if prevent_unoptimized or "wal_delta" in methods:
        # A failed wal_delta falls back; with prevent_unoptimized always to snapshot.
        methods.add(sel["fallback_prevent_unoptimized"] if prevent_unoptimized else "snapshot")
    return methods


def transfer_ports(config: dict[str, Any], prevent_unoptimized: bool = False) -> set[int]:
    named = {"p2p": config["cluster"]["p2p"]["port"], "rest": config["service"]["http_port"]}
    return {named[p] for m in transfer_methods(config, prevent_unoptimized) for p in FACTS["methods"][m]["ports"]}


def _peer_labels(rendering: Rendering) -> dict[str, str]:
    sts = rendering.get("StatefulSet", "docquery-qdrant")
    return {str(k): str(v) for k, v in sts["spec"]["template"]["metadata"]["labels"].items()}


@pytest.mark.parametrize("name", CLUSTERED)
def test_every_transfer_qdrant_may_start_gets_through(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    config = qdrant_config(r)
    labels = _peer_labels(r)
    ports = transfer_ports(config)
    assert ports, "no transfer port resolved"
    blocked = sorted(p for p in ports if not ds.tcp_allowed(r.docs, labels, labels, p))
    assert not blocked, f"{name}: Qdrant transfers need peer->peer TCP {blocked}, which the NetworkPolicies block"


def test_the_pinned_method_keeps_transfers_on_the_tls_peer_port(renderings: dict[str, Rendering]) -> None:
    config = qdrant_config(renderings["overlay-prod"])
    assert config["cluster"]["p2p"]["enable_tls"] is True
    assert transfer_ports(config) == {config["cluster"]["p2p"]["port"]}
    # The REST port stays closed between peers: nothing in the bundle needs it.
    labels = _peer_labels(renderings["overlay-prod"])
    assert not ds.tcp_allowed(renderings["overlay-prod"].docs, labels, labels, config["service"]["http_port"])


def test_docquery_never_sets_prevent_unoptimized() -> None:
    """With prevent_unoptimized on a collection, Qdrant falls back to snapshot transfers
    whatever the configured method (facts: fallback_cite)."""
    for path in (ds.REPO / "docquery").rglob("*.py"):
        assert "prevent_unoptimized" not in path.read_text(), path


@pytest.mark.parametrize(
    ("storage", "prevent", "needs_rest"),
    [
        ({}, False, True),  # Qdrant 1.18+ with no preference: snapshot, from the REST port
        ({"shard_transfer_method": None}, False, True),
        ({"shard_transfer_method": "snapshot"}, False, True),
        ({"shard_transfer_method": "wal_delta"}, False, True),  # its fallback is snapshot
        ({"shard_transfer_method": "stream_records"}, False, False),
        ({"shard_transfer_method": "stream_records"}, True, True),
    ],
)
def test_transfer_port_rule_from_the_facts(storage: dict[str, Any], prevent: bool, needs_rest: bool) -> None:
    config = {"storage": storage, "cluster": {"p2p": {"port": 6335}}, "service": {"http_port": 6333}}
    ports = transfer_ports(config, prevent_unoptimized=prevent)
    assert 6335 in ports
    assert (6333 in ports) is needs_rest


def test_the_bundle_as_it_was_would_fail(renderings: dict[str, Rendering]) -> None:
    """Without the pinned method, the check above finds the REST port blocked."""
    r = renderings["overlay-prod"]
    config = qdrant_config(r)
    config["storage"].pop("shard_transfer_method")
    labels = _peer_labels(r)
    assert any(not ds.tcp_allowed(r.docs, labels, labels, p) for p in transfer_ports(config))


def test_tcp_allowed_follows_networkpolicy_semantics() -> None:
    a, b = {"app": "a"}, {"app": "b"}

    def np(name: str, sel: dict[str, str], **spec: Any) -> dict[str, Any]:
        types = [t for t in ("Ingress", "Egress") if t.lower() in spec]
        return {
            "kind": "NetworkPolicy",
            "metadata": {"name": name},
            "spec": {"podSelector": {"matchLabels": sel}, "policyTypes": types, **spec},
        }

    deny = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }
    out = np(
        "a-out", a, egress=[{"to": [{"podSelector": {"matchLabels": b}}], "ports": [{"protocol": "TCP", "port": 1}]}]
    )
    inn = np(
        "b-in", b, ingress=[{"from": [{"podSelector": {"matchLabels": a}}], "ports": [{"protocol": "TCP", "port": 1}]}]
    )
    other_ns = np("b-in-ns", b, ingress=[{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": a}}]}])
    assert ds.tcp_allowed([deny, out, inn], a, b, 1)
    assert not ds.tcp_allowed([deny, out, inn], a, b, 2)
    assert not ds.tcp_allowed([deny, out], a, b, 1)
    assert not ds.tcp_allowed([deny, inn], a, b, 1)
    assert ds.tcp_allowed([deny, out, other_ns], a, b, 1)  # {} selects this namespace too
    monitoring = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    other_ns["spec"]["ingress"][0]["from"][0]["namespaceSelector"] = monitoring
    assert not ds.tcp_allowed([deny, out, other_ns], a, b, 1)
    assert ds.tcp_allowed([], a, b, 7)
