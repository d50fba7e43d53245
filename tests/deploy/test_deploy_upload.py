"""The ingestion API as deployed: the upload pod writes, the query pods cannot.

Which Vault path holds which Qdrant key is read from the README's install commands (step 2),
what each role may read from policies/vault/, and what each pod renders from its annotations;
the service's settings are those its ConfigMaps and env give it, parsed by the service's own
settings model; the spool's place is the service's own (``docquery.api.uploads.spool``).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest
from deploy_support import Rendering

from docquery.api.uploads.spool import spool_root
from docquery.api.uploads.start import upload_body_bound
from docquery.config.settings import Settings, UploadSettings
from ingest.handover import MAX_BYTES_PER_REQUEST

README = (ds.K8S / "README.md").read_text()
VAULT = "vault.hashicorp.com/"
SECRET = VAULT + "agent-inject-secret-"
UPLOAD, QUERY = "docquery-upload", "docquery-query"
RENDERINGS = ["overlay-dev", "overlay-prod", "base", "component-embed-server", "component-ui-oidc"]


def _pod(r: Rendering, name: str) -> dict[str, Any]:
    template: dict[str, Any] = r.get("Deployment", name)["spec"]["template"]
    return template


def effective_env(r: Rendering, name: str) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom in order, then env over it."""
    c = _pod(r, name)["spec"]["containers"][0]
    env: dict[str, str] = {}
    for ref in c.get("envFrom") or []:
        cm = ref["configMapRef"]
        try:
            env.update(r.get("ConfigMap", cm["name"])["data"])
        except KeyError:
            assert cm.get("optional"), f"{name}: ConfigMap {cm['name']} missing"
    env.update({e["name"]: e["value"] for e in c.get("env") or [] if "value" in e})
    return env


def _vault_values() -> dict[str, str]:
    """KV path -> the shell value step 2 stores there ($VAR, @file or a literal), loops unrolled."""
    step = README.split("**2. Vault: policies, Kubernetes auth roles, secrets.**", 1)[1].split("**3.", 1)[0]
    out: dict[str, str] = {}
    loop: list[str] = []
    for raw in step.splitlines():
        line = raw.split("  #", 1)[0].strip()
        m = re.match(r"for (\w+) in (.+); do$", line)
        if m:
            loop = [f"{m.group(1)}={v}" for v in m.group(2).split()]
            continue
        if line == "done":
            loop = []
            continue
        m = re.match(r'vault kv put "?secret/([^" ]+)"? (.+)$', line)
        if not m:
            continue
        for binding in loop or [""]:
            path = m.group(1)
            if binding:
                var, value = binding.split("=")
                path = path.replace(f"${var}", value)
            for field, value in re.findall(r"(\w+)=(\S+)", m.group(2)):
                out[f"secret/data/{path}" + ("" if field == "value" else f"#{field}")] = value.strip('"')
    return out


def _readable(role: str) -> list[str]:
    hcl = (ds.POLICIES / "vault" / f"{role.removeprefix('docquery-')}.hcl").read_text()
    return [p for p, body in re.findall(r'path\s+"([^"]+)"\s*\{(.*?)\}', hcl, flags=re.S) if '"read"' in body]


def test_the_readme_stores_the_keys_where_the_pods_read_them() -> None:
    values = _vault_values()
    assert values["secret/data/docquery/upload/qdrant-api-key"] == "$QDRANT_RW"
    assert values["secret/data/docquery/query/qdrant-read-only-key"] == "$QDRANT_RO"
    assert values["secret/data/docquery/qdrant/config#api_key"] == "$QDRANT_RW"
    # The upload pods' copies of what the query pods read hold the same values.
    twins = {p: v for p, v in values.items() if p.startswith("secret/data/docquery/upload/")}
    assert len(twins) >= 5
    for path, value in twins.items():
        query_twin = path.replace("/upload/", "/query/")
        if query_twin in values:
            assert values[query_twin] == value, path


@pytest.mark.parametrize("name", RENDERINGS)
def test_the_query_pods_hold_no_write_key_and_no_writable_volume(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    pod = _pod(r, QUERY)
    rw_paths = {p for p, v in _vault_values().items() if v == "$QDRANT_RW"}
    rendered = {k: v for k, v in pod["metadata"]["annotations"].items() if k.startswith(SECRET)}
    assert not set(rendered.values()) & rw_paths
    # Nor could its role read one, were an annotation added.
    for glob in _readable(pod["metadata"]["annotations"][VAULT + "role"]):
        assert not [p for p in rw_paths if fnmatch.fnmatchcase(p.split("#")[0], glob)], glob
    # Scratch only: no claim, and every writable mount an emptyDir.
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert not [v for v in volumes.values() if "persistentVolumeClaim" in v]
    for c in pod["spec"]["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        for m in c.get("volumeMounts") or []:
            assert m.get("readOnly") or "emptyDir" in volumes[m["name"]], (c["name"], m)
    env = effective_env(r, QUERY)
    assert UploadSettings(enabled=env["DOCQUERY_UPLOADS__ENABLED"]).enabled is False  # POST /v1/documents: 503
    assert int(env["DOCQUERY_API__MAX_BODY_BYTES"]) == 64 * 1024


@pytest.mark.parametrize("name", RENDERINGS)
def test_the_upload_pod_writes_from_its_spool(renderings: dict[str, Rendering], name: str) -> None:
    r = renderings[name]
    d = r.get("Deployment", UPLOAD)
    pod = d["spec"]["template"]
    a = pod["metadata"]["annotations"]
    assert a[VAULT + "role"] == UPLOAD and a[VAULT + "agent-inject-containers"] == "upload"
    assert _vault_values()[a[SECRET + "qdrant-api-key"]] == "$QDRANT_RW"
    # The callers are the query service's: API keys, tokens and the page's session, as files.
    for f in ("api-keys.json", "jwks.json", "ui-session-keys"):
        assert a[SECRET + f] == f"secret/data/docquery/upload/{f.removesuffix('.json')}"
    env = effective_env(r, UPLOAD)
    uploads = UploadSettings(
        enabled=env["DOCQUERY_UPLOADS__ENABLED"],
        max_file_bytes=env["DOCQUERY_UPLOADS__MAX_FILE_BYTES"],
        max_files=env["DOCQUERY_UPLOADS__MAX_FILES"],
        queue=env["DOCQUERY_UPLOADS__QUEUE"],
    )
    assert uploads.enabled and uploads.max_file_bytes >= 100 * 1024 * 1024
    assert int(env["DOCQUERY_API__MAX_BODY_BYTES"]) == 64 * 1024  # every route but the streamed upload
    # The spool is where the service puts it, under the data dir, on the claim.
    spool = spool_root(
        Settings(data_dir=Path(env["DOCQUERY_DATA_DIR"])), env.get("DOCQUERY_QDRANT__COLLECTION", "docquery")
    )
    c = pod["spec"]["containers"][0]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    on_claim = [m for m in c["volumeMounts"] if m["name"] in claims and spool.is_relative_to(m["mountPath"])]
    assert len(on_claim) == 1 and not on_claim[0].get("readOnly")
    pvc = r.get("PersistentVolumeClaim", claims[on_claim[0]["name"]])
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    # Room for a full queue of the largest files.
    size = pvc["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi") and int(size[:-2]) * 1024**3 >= uploads.queue * uploads.max_file_bytes


@pytest.mark.parametrize("name", RENDERINGS)
def test_one_upload_pod_at_a_time(renderings: dict[str, Rendering], name: str) -> None:
    """Its worker re-queues every unfinished upload record as its own at start: a second pod
    would fail the first one's documents (their spool files are not on its volume)."""
    r = renderings[name]
    d = r.get("Deployment", UPLOAD)
    assert d["spec"]["replicas"] == 1 and ds.min_pods(r.docs, d) == 1
    assert d["spec"]["strategy"] == {"type": "Recreate"}  # no surge pod beside the old one
    assert not [h for h in r.of_kind("HorizontalPodAutoscaler") if h["spec"]["scaleTargetRef"]["name"] == UPLOAD]
    labels = d["spec"]["template"]["metadata"]["labels"]
    # A budget for one pod either protects nothing or blocks every drain.
    assert not [p for p in r.of_kind("PodDisruptionBudget") if ds.selector_matches(p["spec"]["selector"], labels)]


@pytest.mark.parametrize("name", RENDERINGS)
def test_upload_and_query_pods_embed_and_sign_in_alike(renderings: dict[str, Rendering], name: str) -> None:
    """Uploaded chunks and questions go through one embedder; a page session opens on both."""
    r = renderings[name]
    q, u = effective_env(r, QUERY), effective_env(r, UPLOAD)
    for key in {k for k in q | u if k.startswith(("DOCQUERY_EMBEDDER__", "DOCQUERY_QDRANT__", "DOCQUERY_UI__"))}:
        assert q.get(key) == u.get(key), key
    a = _pod(r, UPLOAD)["metadata"]["annotations"]
    upload = {"app.kubernetes.io/name": UPLOAD}
    with_embed_server = name in ("overlay-prod", "component-embed-server")
    assert ("DOCQUERY_EMBEDDER__BASE_URL" in u) is with_embed_server
    if with_embed_server:
        assert a[SECRET + "embedder-api-key"] == "secret/data/docquery/upload/embedder-api-key"
        assert ds.tcp_allowed(r.docs, upload, {"app.kubernetes.io/name": "docquery-vllm-embed"}, 8000)
    with_oidc = name in ("overlay-prod", "component-ui-oidc")
    assert ("DOCQUERY_UI__OIDC_ISSUER" in u) is with_oidc
    if with_oidc:
        # A session due its refresh is refreshed where it arrives: the upload pod reaches the IdP too.
        assert a[SECRET + "ui-oidc-client-secret"] == "secret/data/docquery/upload/ui-oidc-client-secret"
        idp = r.get("NetworkPolicy", "docquery-query-idp")
        assert ds.selector_matches(idp["spec"]["podSelector"], upload)


def test_the_gateway_limit_fits_one_largest_file_and_the_cli_batches(renderings: dict[str, Rendering]) -> None:
    env = effective_env(renderings["overlay-prod"], UPLOAD)
    one_file = UploadSettings(max_files=1, max_file_bytes=env["DOCQUERY_UPLOADS__MAX_FILE_BYTES"])
    limit = upload_body_bound(one_file)
    section = " ".join(README.split("**Body limits.**", 1)[1].split("\n- **", 1)[0].split())
    assert f"upload rule: {limit} bytes" in section
    assert f"{env['DOCQUERY_API__MAX_BODY_BYTES']} bytes on every other rule" in section
    assert limit > MAX_BYTES_PER_REQUEST  # `docquery ingest --server` batches fit under it
    route = renderings["overlay-prod"].get("HTTPRoute", "docquery")
    assert str(limit) in (ds.K8S / "base" / "route" / "httproute.yaml").read_text()
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": UPLOAD, "port": 8080}]


@pytest.mark.parametrize("name", ["overlay-dev", "overlay-prod"])
def test_only_the_gateway_reaches_the_upload_api(renderings: dict[str, Rendering], name: str) -> None:
    np = renderings[name].get("NetworkPolicy", UPLOAD)
    peers = [p for rule in np["spec"]["ingress"] for p in rule["from"] if 8080 in [x["port"] for x in rule["ports"]]]
    assert [p.get("podSelector", {}).get("matchLabels") for p in peers] == [
        {"gateway.networking.k8s.io/gateway-name": "docquery"}
    ]
    docs = renderings[name].docs
    upload = {"app.kubernetes.io/name": UPLOAD}
    for w in ds.workloads(docs):
        if w.namespace == ds.NAMESPACE:
            assert not ds.tcp_allowed(docs, w.labels, upload, 8080), w.name
