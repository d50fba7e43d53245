"""The Vault wiring of the manifests agrees with the HCL policies in policies/vault/ and the README."""

from __future__ import annotations

import fnmatch
import re

import deploy_support as ds
import upstream
from deploy_support import Rendering

VAULT = "vault.hashicorp.com/"


def _readable_paths(role: str) -> list[str]:
    hcl = (ds.POLICIES / "vault" / f"{role.removeprefix('docquery-')}.hcl").read_text()
    out = []
    for path, body in re.findall(r'path\s+"([^"]+)"\s*\{(.*?)\}', hcl, flags=re.S):
        if '"read"' in body:
            out.append(path)
    return out


def test_every_rendered_secret_path_is_readable_by_its_role(renderings: dict[str, Rendering]) -> None:
    problems = []
    for r in renderings.values():
        for w in ds.workloads(r.docs):
            a = w.pod.annotations
            role = a.get(VAULT + "role")
            if not role:
                continue
            allowed = _readable_paths(role)
            for key, path in a.items():
                if key.startswith(VAULT + "agent-inject-secret-"):
                    if not any(fnmatch.fnmatchcase(path, glob) for glob in allowed):
                        problems.append(f"{r.name}/{w.name}: role {role} cannot read {path}")
                    template = a.get(VAULT + "agent-inject-template-" + key.rsplit("agent-inject-secret-", 1)[1], "")
                    assert f'secret "{path}"' in template, (w.name, key)
    assert not problems, "\n".join(problems)


def test_readme_documents_every_role_in_use(renderings: dict[str, Rendering]) -> None:
    readme = (ds.K8S / "README.md").read_text()
    roles = {
        w.pod.annotations[VAULT + "role"]
        for r in renderings.values()
        for w in ds.workloads(r.docs)
        if VAULT + "role" in w.pod.annotations
    }
    assert roles == {
        "docquery-query",
        "docquery-upload",
        "docquery-ingest",
        "docquery-vllm",
        "docquery-vllm-embed",
        "docquery-qdrant",
        "docquery-qdrant-backup",
    }
    for role in roles:
        assert f"| `{role}` |" in readme, role
        assert (ds.POLICIES / "vault" / f"{role.removeprefix('docquery-')}.hcl").is_file()


def test_readme_describes_every_component() -> None:
    readme = (ds.K8S / "README.md").read_text()
    for name in [*ds.component_names(), "release-images"]:
        assert f"| `{name}` |" in readme, name


def _rendered_paths(renderings: dict[str, Rendering]) -> dict[str, set[str]]:
    """Vault role -> every KV path some pod of that role renders."""
    out: dict[str, set[str]] = {}
    for r in renderings.values():
        for w in ds.workloads(r.docs):
            a = w.pod.annotations
            if VAULT + "role" in a:
                paths = {v for k, v in a.items() if k.startswith(VAULT + "agent-inject-secret-")}
                out.setdefault(a[VAULT + "role"], set()).update(paths)
    return out


def test_no_role_can_read_another_roles_secrets(renderings: dict[str, Rendering]) -> None:
    """E.g. the embed server (its own role) cannot read the generation server's key."""
    paths = _rendered_paths(renderings)
    leaks = [
        f"{role} can read {path} (rendered for {owner})"
        for role in paths
        for owner, owned in paths.items()
        if owner != role
        for path in owned
        if any(fnmatch.fnmatchcase(path, glob) for glob in _readable_paths(role))
    ]
    assert not leaks, "\n".join(leaks)
    service_accounts = {
        w.pod.annotations[VAULT + "role"]: w.pod.spec["serviceAccountName"]
        for r in renderings.values()
        for w in ds.workloads(r.docs)
        if VAULT + "role" in w.pod.annotations
    }
    assert service_accounts["docquery-vllm-embed"] == "docquery-vllm-embed"
    assert service_accounts["docquery-vllm"] == "docquery-vllm"


def test_the_bundles_roles_hold_no_transit_grant() -> None:
    """Encryption at rest is off in the bundle and the app container has no Vault token."""
    for role in ("query", "ingest", "vllm", "vllm-embed", "qdrant"):
        assert "transit/" not in (ds.POLICIES / "vault" / f"{role}.hcl").read_text(), role


def test_secrets_reach_only_the_containers_that_read_them(renderings: dict[str, Rendering]) -> None:
    """What the injector mounts (vault-k8s Patch: vault-secrets into agent-inject-containers,
    or into every container when unset): never into a metrics proxy."""
    for r in renderings.values():
        for w in ds.workloads(r.docs):
            pod = upstream.inject_vault_agent(w.name, {"metadata": w.pod.metadata, "spec": w.pod.spec}, ds.NAMESPACE)
            for c in pod["spec"]["containers"]:
                if c["name"] in upstream.INJECTED_CONTAINERS:
                    continue
                mounted = any(m["name"] == "vault-secrets" for m in c.get("volumeMounts") or [])
                if "metrics" in c["name"] or "nginx" in c.get("image", ""):
                    assert not mounted, f"{r.name}/{w.name}: {c['name']} can read /vault/secrets"


def test_qdrant_serves_metrics_itself(renderings: dict[str, Rendering]) -> None:
    """Qdrant v1.17+ (src/settings.rs ServiceConfig.metrics_port, tag v1.19.0 = 74f3e85b):
    a separate /metrics-only listener without API keys; no proxy holding a key."""
    for r in renderings.values():
        sts = r.get("StatefulSet", "docquery-qdrant")
        names = [c["name"] for c in sts["spec"]["template"]["spec"]["containers"]]
        assert names == ["qdrant"], (r.name, names)
        cfg = sts["spec"]["template"]["metadata"]["annotations"][VAULT + "agent-inject-template-qdrant-config.yaml"]
        assert "metrics_port: 9400" in cfg
        ports = {p["name"]: p["containerPort"] for p in sts["spec"]["template"]["spec"]["containers"][0]["ports"]}
        assert ports["metrics"] == 9400
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        assert not any("metrics-auth" in k for k in annotations)


def test_rotation_is_documented_as_the_servers_behave() -> None:
    """vLLM and Qdrant read their keys only at start (vLLM: argparse at launch;
    Qdrant: src/settings.rs at start, alt_api_key since v1.17); cert_ttl reloads only
    the REST certificate (Qdrant config/config.yaml: "Does not support gRPC")."""
    readme = (ds.K8S / "README.md").read_text()
    section = readme.split("## Rotating keys", 1)[1].split("\n## ", 1)[0]
    for needle in ("rollout restart deployment/docquery-vllm", "alt_api_key", "previous=", "no overlap exists"):
        assert needle in section, needle
    assert "cert_ttl` reloads the HTTPS (REST) certificate only" in section
    for path in ds.K8S.rglob("*.yaml"):
        text = path.read_text().lower()
        assert "rotation needs no restart" not in text, path
        assert "re-reads it every cert_ttl" not in text, path
