"""Every overlay and component renders, and each says what it does."""

from __future__ import annotations

from typing import Any

import deploy_support as ds
import yaml
from deploy_support import Rendering


def _containers(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["spec"]["template"]["spec"]["containers"]


def test_every_combination_renders(renderings: dict[str, Rendering]) -> None:
    assert {"overlay-dev", "overlay-prod", "base"} <= set(renderings)
    assert {f"component-{c}" for c in ds.component_names()} <= set(renderings)
    for r in renderings.values():
        assert r.docs, r.name


def test_everything_lives_in_the_docquery_namespace(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        for d in r.docs:
            if d["kind"] == "Namespace":
                assert d["metadata"]["name"] == ds.NAMESPACE
            elif d["kind"] in ds.CLUSTER_KINDS:
                assert "namespace" not in d["metadata"]
            else:
                assert d["metadata"].get("namespace") == ds.NAMESPACE, (r.name, d["kind"], d["metadata"]["name"])


def test_everything_is_labelled_part_of_docquery(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        for d in r.docs:
            labels = d["metadata"].get("labels") or {}
            assert labels.get("app.kubernetes.io/part-of") == "docquery", (r.name, d["kind"], d["metadata"]["name"])


def _overlay_kustomizations() -> list[tuple[str, dict]]:
    out = []
    for name in ds.overlay_names():
        out.append((name, yaml.safe_load((ds.K8S / "overlays" / name / "kustomization.yaml").read_text())))
        ingest = ds.ingest_dir(f"overlay-{name}")
        if ingest is not None:
            out.append((f"{name}/ingest", yaml.safe_load((ingest / "kustomization.yaml").read_text())))
        models = ds.K8S / "overlays" / name / "models" / "kustomization.yaml"
        if models.is_file():
            out.append((f"{name}/models", yaml.safe_load(models.read_text())))
    return out


def test_overlays_only_combine() -> None:
    allowed_keys = {"apiVersion", "kind", "resources", "components", "replicas", "patches"}
    for name, k in _overlay_kustomizations():
        up = "../../../" if "/" in name else "../../"
        assert set(k) <= allowed_keys, (name, set(k) - allowed_keys)
        assert all(r.startswith(up + "base") for r in k.get("resources", []))
        assert all(c.startswith(up + "components/") for c in k.get("components", []))
        assert up + "components/release-images" in k.get("components", [])
        for patch in k.get("patches", []):
            # Only the ingest fan-out (completions, parallelism and INGEST_SHARDS), in the ingest run.
            assert name.endswith("/ingest"), (name, patch)
            assert patch["target"] == {"kind": "Job", "name": "docquery-ingest"}, (name, patch)
            ops = yaml.safe_load(patch["patch"])
            assert {op["path"] for op in ops} == {
                "/spec/completions",
                "/spec/parallelism",
                "/spec/template/spec/containers/0/env/1/value",
            }


def test_ingest_is_an_indexed_job_whose_shards_match_completions(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        job = r.get("Job", "docquery-ingest")
        assert job["spec"]["podFailurePolicy"]["rules"], r.name
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed"
        c = _containers(job)[0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert c["env"][1]["name"] == "INGEST_SHARDS"  # the overlays patch it by index
        assert int(env["INGEST_SHARDS"]) == spec["completions"], r.name
        assert spec["parallelism"] <= spec["completions"]
        assert "--shard=$(JOB_COMPLETION_INDEX)/$(INGEST_SHARDS)" in c["args"]
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert mounts["sources"].get("readOnly") is True
        vol = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "sources")
        assert vol["persistentVolumeClaim"]["readOnly"] is True
    assert renderings["overlay-prod"].get("Job", "docquery-ingest")["spec"]["parallelism"] > 1
    assert renderings["overlay-dev"].get("Job", "docquery-ingest")["spec"]["parallelism"] >= 1


def test_dev_is_cpu_only_and_extractive(renderings: dict[str, Rendering]) -> None:
    dev = renderings["overlay-dev"]
    names = {(d["kind"], d["metadata"]["name"]) for d in dev.docs}
    assert ("ConfigMap", "docquery-llm") not in names  # query stays extractive
    for d in dev.docs:
        if d["kind"] in ("Deployment", "StatefulSet", "Job"):
            for c in _containers(d):
                for section in ("requests", "limits"):
                    assert not any("gpu" in k for k in c["resources"].get(section, {})), d["metadata"]["name"]


def test_vllm_base_shape(renderings: dict[str, Rendering]) -> None:
    d = renderings["base"].get("Deployment", "docquery-vllm")
    pod = d["spec"]["template"]["spec"]
    c = _containers(d)[0]
    assert c["resources"]["requests"]["nvidia.com/gpu"] == c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    args = " ".join(c["args"])
    assert c["args"][c["args"].index("--config") + 1] == "/vault/secrets/vllm-config.yaml"
    assert "--disable-fastapi-docs" in args and "--enable-log-requests" not in args
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and "VLLM_API_KEY" not in env and "VLLM_SERVER_DEV_MODE" not in env
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health"
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    models = next(v for v in pod["volumes"] if v["name"] == "models")
    assert models["persistentVolumeClaim"]["readOnly"] is True


def test_qdrant_keys_come_from_the_vault_rendered_config(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        sts = r.get("StatefulSet", "docquery-qdrant")
        c = _containers(sts)[0]
        assert "/vault/secrets/qdrant-config.yaml" in " ".join(c.get("command", []) + c.get("args", []))
        assert not any(e["name"].startswith("QDRANT__") for e in c.get("env", [])), r.name
        template = sts["spec"]["template"]["metadata"]["annotations"][
            "vault.hashicorp.com/agent-inject-template-qdrant-config.yaml"
        ]
        assert "api_key:" in template and "read_only_api_key:" in template
        assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "storage"


def test_qdrant_cluster_component(renderings: dict[str, Rendering]) -> None:
    for name in ("component-qdrant-cluster", "overlay-prod"):
        r = renderings[name]
        sts = r.get("StatefulSet", "docquery-qdrant")
        assert sts["spec"]["replicas"] >= 3
        pod = sts["spec"]["template"]
        anti = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
        cfg = pod["metadata"]["annotations"]["vault.hashicorp.com/agent-inject-template-qdrant-config.yaml"]
        assert "enable_tls: true" in cfg and "port: 6335" in cfg
        assert any(p["containerPort"] == 6335 for p in _containers(sts)[0]["ports"])
        assert "https://" in _containers(sts)[0]["args"][0]
        pdb = r.get("PodDisruptionBudget", "docquery-qdrant")
        assert pdb["spec"]["maxUnavailable"] == 1
        client = r.get("ConfigMap", "docquery-qdrant-client")["data"]
        assert int(client["DOCQUERY_QDRANT__REPLICATION_FACTOR"]) >= 2
        assert int(client["DOCQUERY_QDRANT__SHARD_NUMBER"]) >= 3
    assert renderings["overlay-dev"].get("StatefulSet", "docquery-qdrant")["spec"]["replicas"] == 1


def test_gpu_dra_component(renderings: dict[str, Rendering]) -> None:
    for name in ("component-gpu-dra", "overlay-prod"):
        r = renderings[name]
        rct = r.get("ResourceClaimTemplate", "docquery-vllm-gpu")
        assert rct["apiVersion"] == "resource.k8s.io/v1"
        req = rct["spec"]["spec"]["devices"]["requests"][0]
        assert req["exactly"] == {"deviceClassName": "gpu.nvidia.com", "count": 1}
        d = r.get("Deployment", "docquery-vllm")
        pod = d["spec"]["template"]["spec"]
        assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "docquery-vllm-gpu"}]
        c = _containers(d)[0]
        assert c["resources"]["claims"] == [{"name": "gpu"}]
        assert "nvidia.com/gpu" not in c["resources"]["requests"] and "nvidia.com/gpu" not in c["resources"]["limits"]


def test_multinode_vllm_component(renderings: dict[str, Rendering]) -> None:
    r = renderings["component-multinode-vllm"]
    assert not [d for d in r.of_kind("Deployment") if d["metadata"]["name"] == "docquery-vllm"]
    lws = r.get("LeaderWorkerSet", "docquery-vllm-lws")
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 2 and tmpl["restartPolicy"] == "RecreateGroupOnPodRestart"
    wl = r.get("Workload", "docquery-vllm")
    assert wl["apiVersion"] == "scheduling.k8s.io/v1beta1"
    group = wl["spec"]["podGroupTemplates"][0]
    assert group["schedulingPolicy"]["gang"]["minCount"] == tmpl["size"]
    pg = r.get("PodGroup", "docquery-vllm-lws-0")
    assert pg["spec"]["workloadRef"] == {"workloadName": "docquery-vllm", "templateName": group["name"]}
    for part in ("leaderTemplate", "workerTemplate"):
        spec = tmpl[part]["spec"]
        assert spec["schedulingGroup"]["podGroupName"] == "docquery-vllm-lws-0"
        labels = tmpl[part]["metadata"]["labels"]
        assert labels["leaderworkerset.sigs.k8s.io/name"] == "docquery-vllm-lws"
        for c in spec["containers"]:
            assert "@sha256:" in c["image"]
    assert tmpl["leaderTemplate"]["metadata"]["labels"]["app.kubernetes.io/name"] == "docquery-vllm"
    # leader <-> worker: all ports, only between the pods of this LWS
    np = r.get("NetworkPolicy", "docquery-vllm-group")
    sel = {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "docquery-vllm-lws"}}
    assert np["spec"]["podSelector"] == sel
    assert np["spec"]["ingress"] == [{"from": [{"podSelector": sel}]}]
    assert np["spec"]["egress"] == [{"to": [{"podSelector": sel}]}]


def test_autoscaling_component(renderings: dict[str, Rendering]) -> None:
    r = renderings["component-autoscaling"]
    hpa = r.get("HorizontalPodAutoscaler", "docquery-vllm")
    metric = hpa["spec"]["metrics"][0]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"] == "vllm:num_requests_waiting"
    assert r.get("HorizontalPodAutoscaler", "docquery-query")["spec"]["scaleTargetRef"]["name"] == "docquery-query"


def test_userns_only_on_non_gpu_pods(renderings: dict[str, Rendering]) -> None:
    for name in ("component-userns", "overlay-prod"):
        r = renderings[name]
        for w in ds.workloads(r.docs):
            gpu = ds.dq_podspec.requests_gpu(w.pod)
            expected = None if gpu else False
            assert w.pod.spec.get("hostUsers") is expected, (name, w.name)


def test_cilium_egress_component(renderings: dict[str, Rendering], flow_rows: list[dict[str, str]]) -> None:
    r = renderings["component-cilium-egress"]
    cnp = r.get("CiliumNetworkPolicy", "docquery-ingest-object-store")
    assert cnp["apiVersion"] == "cilium.io/v2"
    assert cnp["spec"]["endpointSelector"] == {"matchLabels": {"app.kubernetes.io/name": "docquery-ingest"}}
    egress = cnp["spec"]["egress"]
    dns = [e for e in egress if "toEndpoints" in e]
    assert dns and dns[0]["toPorts"][0]["rules"]["dns"], "toFQDNs needs a DNS L7 rule"
    assert {p["port"] for p in dns[0]["toPorts"][0]["ports"]} == {"53"}
    assert dns[0]["toEndpoints"][0]["matchLabels"]["k8s:k8s-app"] == "kube-dns"
    fqdn = [e for e in egress if "toFQDNs" in e]
    names = {f["matchName"] for e in fqdn for f in e["toFQDNs"]}
    cilium_rows = {(row["from"], row["to"], row["ports"]) for row in flow_rows if row["enforced by"] == "cilium"}
    assert cilium_rows == {("docquery-ingest", n, "TCP 443") for n in names}
    for e in fqdn:
        assert all(p["port"] == "443" for tp in e["toPorts"] for p in tp["ports"])


def test_embed_server_component(renderings: dict[str, Rendering]) -> None:
    for name in ("component-embed-server", "overlay-prod"):
        r = renderings[name]
        cm = r.get("ConfigMap", "docquery-embedder")["data"]
        assert cm["DOCQUERY_EMBEDDER__KIND"] == "openai"
        assert cm["DOCQUERY_EMBEDDER__BASE_URL"].startswith("http://docquery-vllm-embed:8000/")
        clients = [("Deployment", "docquery-query")] + ([("Job", "docquery-ingest")] if name == "overlay-prod" else [])
        for kind, wname in clients:
            d = r.get(kind, wname)
            refs = [e.get("configMapRef", {}).get("name") for e in _containers(d)[0]["envFrom"]]
            assert "docquery-embedder" in refs
            ann = d["spec"]["template"]["metadata"]["annotations"]
            assert "vault.hashicorp.com/agent-inject-secret-embedder-api-key" in ann


def test_operator_expectations(renderings: dict[str, Rendering]) -> None:
    """Priorities, PDBs, a preStop pause, a LimitRange."""
    for r in renderings.values():
        classes = {d["metadata"]["name"]: d for d in r.of_kind("PriorityClass")}
        assert classes["docquery-serving"]["value"] > classes["docquery-batch"]["value"]
        assert classes["docquery-batch"]["preemptionPolicy"] == "Never"
        for w in ds.workloads(r.docs):
            expected = "docquery-batch" if w.kind in ("Job", "CronJob") else "docquery-serving"
            assert w.pod.spec.get("priorityClassName") == expected, (r.name, w.name)
        assert r.of_kind("LimitRange"), r.name
        query = r.get("Deployment", "docquery-query")
        pod = query["spec"]["template"]["spec"]
        sleep = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        assert 0 < sleep < pod["terminationGracePeriodSeconds"]
        pdbs = {
            d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] for d in r.of_kind("PodDisruptionBudget")
        }
        # Every Deployment that runs more than one pod has a budget (test_deploy_disruption.py
        # checks what each allows); a single vLLM has nothing a budget could keep serving.
        for d in r.of_kind("Deployment"):
            if ds.min_pods(r.docs, d) > 1:
                assert d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] in pdbs, (
                    r.name,
                    d["metadata"]["name"],
                )


def test_monitoring_component_scrapes_the_metrics_ports(renderings: dict[str, Rendering]) -> None:
    r = renderings["component-monitoring"]
    monitors = r.of_kind("PodMonitor")
    assert monitors
    scraped = set()
    for m in monitors:
        # The embed server's monitor selects nothing unless embed-server is in the rendering.
        targets = [w for w in ds.workloads(r.docs) if ds.selector_matches(m["spec"]["selector"], w.labels)]
        scraped |= {w.name for w in targets}
        for w in targets:
            ports = {p.get("name") for c in w.pod.containers() for p in c.get("ports") or []}
            assert {e["port"] for e in m["spec"]["podMetricsEndpoints"]} <= ports, (m["metadata"]["name"], ports)
    assert {"docquery-query", "docquery-qdrant", "docquery-vllm"} <= scraped


def test_models_pvc_can_come_from_a_snapshot(renderings: dict[str, Rendering]) -> None:
    pvc = renderings["component-models-from-snapshot"].get("PersistentVolumeClaim", "docquery-models")
    assert pvc["spec"]["dataSource"]["kind"] == "VolumeSnapshot"
    assert pvc["spec"]["accessModes"] == ["ReadOnlyMany"]
