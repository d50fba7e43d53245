"""Every PodDisruptionBudget protects something, and search survives a rollout and a drain.

The disruption controller (kubernetes pkg/controller/disruption) counts the pods a
PDB selects and allows ``maxUnavailable`` of them, or all but ``minAvailable``
(percentages rounded up). A budget that allows every pod it selects to go protects
nothing; one that allows none blocks every drain.
"""

from __future__ import annotations

import math
from typing import Any

import deploy_support as ds
import pytest
from deploy_support import Rendering

SCALED = ("Deployment", "StatefulSet")


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(total * int(value[:-1]) / 100)
    return int(value)


def allowed_disruptions(pdb: dict[str, Any], pods: int) -> int:
    spec = pdb["spec"]
    if "maxUnavailable" in spec:
        return min(pods, _scaled(spec["maxUnavailable"], pods))
    return max(0, pods - _scaled(spec["minAvailable"], pods))


def selected_pods(r: Rendering, pdb: dict[str, Any]) -> int:
    total = 0
    for doc in r.docs:
        if doc.get("kind") not in SCALED:
            continue
        labels = doc["spec"]["template"]["metadata"].get("labels") or {}
        if ds.selector_matches(pdb["spec"]["selector"], {str(k): str(v) for k, v in labels.items()}):
            total += ds.min_pods(r.docs, doc)
    return total


@pytest.mark.parametrize("name", sorted(ds.combos()))
def test_every_pdb_protects_something_and_lets_a_drain_through(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    for pdb in r.of_kind("PodDisruptionBudget"):
        pods = selected_pods(r, pdb)
        allowed = allowed_disruptions(pdb, pods)
        where = f"{name}: PDB {pdb['metadata']['name']} ({pods} pods, {allowed} may go)"
        assert pods > 0, f"{where} selects no workload"
        assert allowed < pods, f"{where} protects nothing"
        assert allowed >= 1, f"{where} blocks every drain"


@pytest.mark.parametrize(
    ("spec", "pods", "allowed"),
    [
        ({"maxUnavailable": 1}, 1, 1),  # the single-replica vLLM's old budget: protects nothing
        ({"maxUnavailable": 1}, 3, 1),
        ({"minAvailable": 1}, 2, 1),
        ({"minAvailable": 1}, 1, 0),  # blocks drains
        ({"minAvailable": "50%"}, 3, 1),
        ({"maxUnavailable": "50%"}, 3, 2),
    ],
)
def test_allowed_disruptions(spec: dict[str, Any], pods: int, allowed: int) -> None:
    assert allowed_disruptions({"spec": spec}, pods) == allowed


@pytest.mark.parametrize("name", ["component-embed-server", "overlay-prod"])
def test_search_survives_a_rollout_and_a_drain(renderings: dict[str, Rendering], name: str) -> None:
    """The embed server: the query service embeds every question through it."""
    r = renderings[name]
    embed = r.get("Deployment", "docquery-vllm-embed")
    pods = ds.min_pods(r.docs, embed)
    assert pods >= 2
    strategy = embed["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert _scaled(strategy["rollingUpdate"]["maxUnavailable"], pods) < pods
    pdb = r.get("PodDisruptionBudget", "docquery-vllm-embed")
    assert pdb["spec"] == {"minAvailable": 1, "selector": pdb["spec"]["selector"]}
    anti = embed["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == "kubernetes.io/hostname"


def test_the_readme_states_what_the_query_service_does_without_the_embedder() -> None:
    """The documented degradation is the service's: an unreachable embedder is a 503 the
    client may retry, and readiness does not depend on the remote embedder."""
    from docquery.api.errors import translate
    from docquery.core.errors import EmbedderUnreachable
    from docquery.embedders.remote import OpenAIEmbedder

    err = translate(EmbedderUnreachable("embeddings request", None, "the embedding server cannot answer now"))
    section = (ds.K8S / "README.md").read_text().split("## Disruptions", 1)[1].split("\n## ", 1)[0]
    assert err.status == 503
    assert f"`type: {err.type}`" in section
    assert f"`Retry-After: {err.headers['Retry-After']}`" in section
    # /readyz probes an embedder only through its `ready` (docquery/api/routes/health.py).
    assert getattr(OpenAIEmbedder, "ready", None) is None
    assert "`/readyz` does not probe the\nremote embedder" in section
