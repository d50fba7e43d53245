"""The multinode vLLM group can form, by what the LWS controller does with it.

LeaderWorkerSet v0.10.0 (kubernetes-sigs/lws, tag v0.10.0 = commit 2161f38f):
- pkg/controllers/leaderworkerset_controller.go reconcileHeadlessServices: with
  networkConfig unset or subdomainPolicy Shared, a headless Service named after
  the LWS, selecting leaderworkerset.sigs.k8s.io/name=<lws>;
- pkg/utils/controller/controller_utils.go CreateHeadlessServiceIfNotExists: created
  only when no Service of that name exists (an existing one is left as it is);
- pkg/utils/pod/pod_utils.go AddLWSVariables: LWS_LEADER_ADDRESS =
  <lws>-<group>.<subdomain>.<namespace>, which resolves only through that headless Service;
- pkg/schedulerprovider: per-group PodGroups exist only for Volcano, so a
  scheduling.k8s.io PodGroup named in the pod template is one static object.
"""

from __future__ import annotations

from typing import Any

import deploy_support as ds
from deploy_support import Rendering


def _lws(renderings: dict[str, Rendering]) -> list[tuple[str, dict[str, Any], Rendering]]:
    return [(r.name, d, r) for r in renderings.values() for d in r.of_kind("LeaderWorkerSet")]


def _headless_service_lws_would_create(lws: dict[str, Any]) -> str | None:
    policy = ((lws["spec"].get("networkConfig") or {}).get("subdomainPolicy")) or "Shared"
    return lws["metadata"]["name"] if policy == "Shared" else None


def test_multinode_renders_an_lws() -> None:
    assert "multinode-vllm" in ds.component_names()


def test_lws_headless_service_is_not_shadowed(renderings: dict[str, Rendering]) -> None:
    found = _lws(renderings)
    assert found
    for name, lws, r in found:
        svc = _headless_service_lws_would_create(lws)
        assert svc is not None, "UniquePerReplica needs per-group Services; the bundle uses Shared"
        clash = [d for d in r.of_kind("Service") if d["metadata"]["name"] == svc]
        assert not clash, f"{name}: Service {svc} exists, so LWS never creates its headless Service"
        # What LWS_LEADER_ADDRESS resolves through: the Service LWS creates, selecting its own pods.
        for part in ("leaderTemplate", "workerTemplate"):
            labels = lws["spec"]["leaderWorkerTemplate"][part]["metadata"]["labels"]
            assert labels.get("leaderworkerset.sigs.k8s.io/name", lws["metadata"]["name"]) == lws["metadata"]["name"]


def test_clients_still_reach_the_leader_through_the_client_service(renderings: dict[str, Rendering]) -> None:
    for name, lws, r in _lws(renderings):
        client = r.get("Service", "docquery-vllm")
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
        worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
        assert ds.selector_matches({"matchLabels": client["spec"]["selector"]}, leader), name
        assert not ds.selector_matches({"matchLabels": client["spec"]["selector"]}, worker), name
        url = r.get("ConfigMap", "docquery-llm")["data"]["DOCQUERY_LLM__BASE_URL"]
        assert url.startswith("http://docquery-vllm:8000/"), name


def test_one_static_podgroup_means_one_group(renderings: dict[str, Rendering]) -> None:
    for name, lws, r in _lws(renderings):
        tmpl = lws["spec"]["leaderWorkerTemplate"]
        groups = {tmpl[p]["spec"]["schedulingGroup"]["podGroupName"] for p in ("leaderTemplate", "workerTemplate")}
        assert len(groups) == 1, name
        (group,) = groups
        pg = r.get("PodGroup", group)
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == tmpl["size"]
        # Every LWS replica's pods name this one PodGroup: more than one replica breaks the gang.
        assert lws["spec"]["replicas"] == 1, name
        assert not [
            h for h in r.of_kind("HorizontalPodAutoscaler") if h["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
        ]


def test_readme_states_the_workload_api_prerequisites() -> None:
    readme = (ds.K8S / "README.md").read_text()
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in readme
    assert "GenericWorkload" in readme
    row = next(ln for ln in readme.splitlines() if "GenericWorkload" in ln and ln.startswith("|"))
    assert "kube-scheduler" in row and "kube-controller-manager" in row
