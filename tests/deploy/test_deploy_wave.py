"""This release's service features, as deployed: trusted proxies, the body limit, the
ingest ACL root, the page's OpenID sign-in behind the same route, and its egress."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import deploy_support as ds
import pytest
from deploy_support import Rendering

README = (ds.K8S / "README.md").read_text()
GATEWAY = {"gateway.networking.k8s.io/gateway-name": "docquery"}


def _query_env(r: Rendering) -> dict[str, str]:
    c = r.get("Deployment", "docquery-query")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in c.get("env") or []}
    for ref in c.get("envFrom") or []:
        name = ref["configMapRef"]["name"]
        try:
            env.update(r.get("ConfigMap", name)["data"])
        except KeyError:
            assert ref["configMapRef"].get("optional"), f"ConfigMap {name} missing"
    return env


@pytest.mark.parametrize("name", ["overlay-dev", "overlay-prod"])
def test_trusted_proxies_are_cidrs_and_only_the_gateway_reaches_the_api(
    renderings: dict[str, Rendering], name: str
) -> None:
    r = renderings[name]
    proxies = json.loads(_query_env(r)["DOCQUERY_API__TRUSTED_PROXIES"])
    assert isinstance(proxies, list) and proxies
    for cidr in proxies:
        assert ipaddress.ip_network(cidr).prefixlen > 0, "trusting every address makes the header the client's"
    # Believing X-Forwarded-For is sound only because nothing but the Gateway opens 8080.
    np = r.get("NetworkPolicy", "docquery-query")
    peers = [p for rule in np["spec"]["ingress"] for p in rule["from"] if 8080 in [x["port"] for x in rule["ports"]]]
    assert [p.get("podSelector", {}).get("matchLabels") for p in peers] == [GATEWAY]


def test_the_body_limit_is_the_one_the_readme_sets_at_the_gateway(renderings: dict[str, Rendering]) -> None:
    limit = _query_env(renderings["overlay-prod"])["DOCQUERY_API__MAX_BODY_BYTES"]
    section = README.split("**Body limits.**", 1)[1].split("\n- **", 1)[0]
    assert f"{limit} bytes on every other rule" in " ".join(section.split())
    assert int(limit) == 64 * 1024


@pytest.mark.parametrize("name", ["overlay-dev", "overlay-prod"])
def test_the_ingest_job_roots_acls_at_the_corpus(renderings: dict[str, Rendering], name: str) -> None:
    job = renderings[name].get("Job", "docquery-ingest")
    c = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    corpus = c["args"][1]  # docquery ingest PATH ...
    assert c["args"][0] == "ingest" and not corpus.startswith("-")
    assert env["DOCQUERY_INGEST__ACL_ROOT"] == corpus
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts[corpus]["readOnly"] is True


def test_the_page_signs_in_through_the_idp_it_may_reach(renderings: dict[str, Rendering]) -> None:
    r = renderings["overlay-prod"]
    env = _query_env(r)
    redirect = env["DOCQUERY_UI__OIDC_REDIRECT_URI"]
    assert redirect.startswith("https://") and redirect.endswith("/ui/oidc/callback")
    scopes = json.loads(env["DOCQUERY_UI__OIDC_SCOPES"])
    assert "openid" in scopes and "offline_access" in scopes  # groups are re-checked through the refresh token
    assert env["DOCQUERY_UI__OIDC_ISSUER"].startswith("https://")
    # The README's registration steps name these exact settings.
    for needle in (
        "DOCQUERY_UI__OIDC_REDIRECT_URI",
        "https://HOST/ui/oidc/callback",
        "DOCQUERY_AUTH__JWT_GROUPS_CLAIM",
    ):
        assert needle in README, needle
    # The query pods may reach the IdP's address on 443 (and the flow table says so).
    np = r.get("NetworkPolicy", "docquery-query-idp")
    cidr = np["spec"]["egress"][0]["to"][0]["ipBlock"]["cidr"]
    assert ipaddress.ip_network(cidr).prefixlen >= 24
    rows = ds.parse_flow_table(ds.K8S / "README.md")
    assert any(
        row["from"] == "docquery-query" and row["to"] == cidr.split("/")[0] and row["prod"] == "yes" for row in rows
    )
    # The client secret reaches the query container only, from the query role's own subtree.
    a = r.get("Deployment", "docquery-query")["spec"]["template"]["metadata"]["annotations"]
    assert a["vault.hashicorp.com/agent-inject-secret-ui-oidc-client-secret"].startswith("secret/data/docquery/query/")
    assert a["vault.hashicorp.com/agent-inject-containers"] == "query"


def test_every_query_pod_shares_the_session_keys(renderings: dict[str, Rendering]) -> None:
    for r in renderings.values():
        a: dict[str, Any] = r.get("Deployment", "docquery-query")["spec"]["template"]["metadata"]["annotations"]
        assert (
            a["vault.hashicorp.com/agent-inject-secret-ui-session-keys"] == "secret/data/docquery/query/ui-session-keys"
        )


@pytest.mark.parametrize("name", ["overlay-dev", "overlay-prod"])
def test_one_route_serves_the_page_and_the_api(renderings: dict[str, Rendering], name: str) -> None:
    rules = renderings[name].get("HTTPRoute", "docquery")["spec"]["rules"]
    last = rules[-1]
    assert "matches" not in last  # no path match: / , /ui/ and /v1/ alike, whatever no other rule takes
    assert last["backendRefs"] == [{"name": "docquery-query", "port": 8080}]


def test_readme_states_the_ingestion_api_layout() -> None:
    assert "runs as its own Deployment,\n`docquery-upload`" in README
    assert "The query service stays read-only" in README
