"""Each workload policy allows exactly its workload's operations, on a real OpenBao.

Every token holds only its policy (no ``default``), as the roles are set up
with ``token_no_default_policy``. Each operation below is tried with each
workload's token: the expected set must succeed, and all others must be 403.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from hvac import exceptions as hvac_exc  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from conftest import Bao

WORKLOADS = ("query", "ingest", "vllm", "vllm-embed", "qdrant")

Op = Callable[[Any], object]


def _kv_read(workload: str, name: str) -> Op:
    return lambda c: c.secrets.kv.v2.read_secret_version(
        path=f"docquery/{workload}/{name}", mount_point="secret", raise_on_deleted_version=True
    )


def _operations(kv_secrets: dict[str, dict[str, str]], wrapped_key: str) -> dict[str, Op]:
    b64 = base64.b64encode(b"x").decode()
    ops: dict[str, Op] = {}
    for workload, secrets in kv_secrets.items():
        for name in secrets:
            ops[f"kv read {workload}/{name}"] = _kv_read(workload, name)
    ops |= {
        "kv write own path": lambda c: c.secrets.kv.v2.create_or_update_secret(
            path="docquery/query/llm-api-key", secret={"value": "x"}, mount_point="secret"
        ),
        "kv list metadata": lambda c: c.secrets.kv.v2.list_secrets(path="docquery", mount_point="secret"),
        "kv read metadata": lambda c: c.secrets.kv.v2.read_secret_metadata(
            path="docquery/query/llm-api-key", mount_point="secret"
        ),
        "kv read other prefix": _kv_read("shared", "anything"),
        "transit datakey plaintext": lambda c: c.secrets.transit.generate_data_key(
            name="docquery", key_type="plaintext"
        ),
        "transit datakey wrapped": lambda c: c.secrets.transit.generate_data_key(name="docquery", key_type="wrapped"),
        "transit decrypt": lambda c: c.secrets.transit.decrypt_data(name="docquery", ciphertext=wrapped_key),
        "transit encrypt": lambda c: c.secrets.transit.encrypt_data(name="docquery", plaintext=b64),
        "transit rewrap": lambda c: c.secrets.transit.rewrap_data(name="docquery", ciphertext=wrapped_key),
        "transit read key": lambda c: c.secrets.transit.read_key(name="docquery"),
        "transit rotate": lambda c: c.secrets.transit.rotate_key(name="docquery"),
        "transit export": lambda c: c.secrets.transit.export_key(name="docquery", key_type="encryption-key"),
        "sys policy list": lambda c: c.sys.list_acl_policies(),
        "sys policy write": lambda c: c.sys.create_or_update_policy(name="evil", policy='path "*" {}'),
        "sys mounts": lambda c: c.sys.list_mounted_secrets_engines(),
        "auth methods": lambda c: c.sys.list_auth_methods(),
        "create child token": lambda c: c.auth.token.create(policies=["query"]),
        "cubbyhole write": lambda c: c.write("cubbyhole/x", value="y"),
    }
    return ops


# The whole grant of each policy besides reading its workload's own KV secrets.
# Everything else in _operations must be 403. The bundle's roles carry no Transit
# grant (encryption at rest is off there); the *-encryption policies are the opt-in.
TRANSIT_ALLOWED: dict[str, set[str]] = {
    "query": set(),
    "ingest": set(),
    "vllm": set(),
    "vllm-embed": set(),
    "qdrant": set(),
    "query-encryption": {"transit decrypt"},
    "ingest-encryption": {"transit datakey plaintext"},
}
OPT_IN = {"query-encryption": "query", "ingest-encryption": "ingest"}


def _allowed(bao: Bao, policy: str) -> set[str]:
    if policy in OPT_IN:
        return TRANSIT_ALLOWED[policy]
    return {f"kv read {policy}/{n}" for n in bao.kv_secrets[policy]} | TRANSIT_ALLOWED[policy]


@pytest.fixture(scope="module")
def wrapped_key(bao: Bao) -> str:
    resp = bao.root().secrets.transit.generate_data_key(name="docquery", key_type="wrapped")
    return str(resp["data"]["ciphertext"])


@pytest.mark.parametrize("workload", [*WORKLOADS, *OPT_IN])
def test_policy_allows_exactly_its_operations(bao: Bao, wrapped_key: str, workload: str) -> None:
    client = bao.client_with_token(bao.token_for_policy(workload))
    allowed = _allowed(bao, workload)
    allowed_ok: list[str] = []
    unexpected: list[str] = []
    for name, op in _operations(bao.kv_secrets, wrapped_key).items():
        try:
            op(client)
        except hvac_exc.Forbidden:
            if name in allowed:
                unexpected.append(f"{name}: denied but needed")
            continue
        if name in allowed:
            allowed_ok.append(name)
        else:
            unexpected.append(f"{name}: allowed but not needed")
    assert unexpected == []
    assert sorted(allowed_ok) == sorted(allowed)
    if workload in OPT_IN:
        return  # an add-on to the workload's own policy, which grants the token upkeep
    # Token upkeep is granted so VaultSession can renew without the default policy.
    client.auth.token.lookup_self()
    client.auth.token.renew_self()


def test_query_token_reads_the_values_it_needs(bao: Bao) -> None:
    client = bao.client_with_token(bao.token_for_policy("query"))
    resp = _kv_read("query", "llm-api-key")(client)
    assert isinstance(resp, dict)
    assert resp["data"]["data"]["value"] == bao.kv_secrets["query"]["llm-api-key"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_service_account_login_gets_only_its_policy(bao: Bao, workload: str) -> None:
    """The k8s role names the manifests use map to exactly one policy each."""
    role = f"docquery-{workload}"
    auth = bao.anon().auth.jwt.jwt_login(role=role, jwt=bao.sa_jwt(role), use_token=False, path="jwt")["auth"]
    assert auth["token_policies"] == sorted([workload, *(p for p, w in OPT_IN.items() if w == workload)])


def test_service_account_of_another_workload_is_refused(bao: Bao) -> None:
    """The ingest SA cannot log in as docquery-query (bound_subject)."""
    with pytest.raises(hvac_exc.InvalidRequest):
        bao.anon().auth.jwt.jwt_login(
            role="docquery-query", jwt=bao.sa_jwt("docquery-ingest"), use_token=False, path="jwt"
        )


def test_token_with_wrong_audience_is_refused(bao: Bao) -> None:
    with pytest.raises(hvac_exc.InvalidRequest):
        bao.anon().auth.jwt.jwt_login(
            role="docquery-query", jwt=bao.sa_jwt("docquery-query", audience="api"), use_token=False, path="jwt"
        )


def test_kubernetes_auth_is_configured_but_token_review_needs_an_apiserver(bao: Bao) -> None:
    """Kubernetes auth accepts the config (CA cert, disable_local_ca_jwt) and the roles,
    but its login asks a kube-apiserver's TokenReview, which cannot run here: it is
    denied. The same SA-shaped JWT logs in through the JWT method above."""
    cfg = bao.root().auth.kubernetes.read_config()
    assert cfg["disable_local_ca_jwt"] is True
    assert "BEGIN CERTIFICATE" in cfg["kubernetes_ca_cert"]
    role = bao.root().auth.kubernetes.read_role("docquery-query")
    assert role["audience"] == "vault"
    with pytest.raises((hvac_exc.Forbidden, hvac_exc.InternalServerError)):
        bao.anon().auth.kubernetes.login(role="docquery-query", jwt=bao.sa_jwt("docquery-query"))


def test_policy_files_are_the_ones_loaded(bao: Bao) -> None:
    root = bao.root()
    for workload in WORKLOADS:
        assert root.sys.read_policy(name=workload)["data"]["rules"].strip()
