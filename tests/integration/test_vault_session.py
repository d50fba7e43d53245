"""VaultSession and VaultSecretSource against a real OpenBao: login (JWT with a
service-account-shaped token, AppRole), KV v2 reads, renewal, re-login after
renewal failure and after expiry.

Short TTLs (ttl=2s, max_ttl=4s) make the server really expire tokens; the
waits are the minimum the server's one-second TTL granularity allows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import hvac  # type: ignore[import-untyped]
import pytest

from docquery.config.settings import Settings
from docquery.secrets import MissingSecretError, build_secret_source, secret_getter
from docquery.secrets.vault import Login, VaultError, VaultSecretSource, VaultSession

if TYPE_CHECKING:
    from conftest import Bao


def _jwt_session(bao: Bao, role: str, sa: str, **kw: float) -> VaultSession:
    login = Login("jwt", role=role, mount="jwt", credential_path=str(bao.write_sa_jwt(sa)))
    return VaultSession(hvac.Client(url=bao.url), login, **kw)


def test_jwt_login_and_kv_read(bao: Bao) -> None:
    session = _jwt_session(bao, "docquery-query", "docquery-query")
    source = VaultSecretSource(session, kv_path="docquery/query")
    llm = source.get_text("llm-api-key")
    assert llm is not None
    assert llm.get_secret_value() == bao.kv_secrets["query"]["llm-api-key"]
    # The contract's file name maps to the query workload's read-only Qdrant key.
    qdrant = source.get_text("qdrant-api-key")
    assert qdrant is not None
    assert qdrant.get_secret_value() == bao.kv_secrets["query"]["qdrant-read-only-key"]
    assert source.get_json("api-keys.json") == []
    assert source.get_json("jwks.json") == {"keys": []}
    assert source.get_text("absent") is None
    assert session.stats.logins == 1


def test_kv_new_version_seen_after_refresh(bao: Bao) -> None:
    now = [0.0]
    session = _jwt_session(bao, "docquery-vllm", "docquery-vllm")
    source = VaultSecretSource(session, kv_path="docquery/vllm", refresh_s=30.0, clock=lambda: now[0])
    before = source.version("api-key")
    bao.root().secrets.kv.v2.create_or_update_secret(
        path="docquery/vllm/api-key", secret={"value": "vllm-key-v2"}, mount_point="secret"
    )
    try:
        first = source.get_text("api-key")
        assert first is not None
        assert first.get_secret_value() == "vllm-key-v1"  # cached within refresh_s
        now[0] = 31.0
        second = source.get_text("api-key")
        assert second is not None
        assert second.get_secret_value() == "vllm-key-v2"
        assert source.version("api-key") == (before or 0) + 1
    finally:
        bao.root().secrets.kv.v2.create_or_update_secret(
            path="docquery/vllm/api-key", secret={"value": "vllm-key-v1"}, mount_point="secret"
        )


def test_deleted_version_reads_as_absent(bao: Bao) -> None:
    root = bao.root()
    root.secrets.kv.v2.create_or_update_secret(
        path="docquery/query/deleted-thing", secret={"value": "x"}, mount_point="secret"
    )
    root.secrets.kv.v2.delete_latest_version_of_secret(path="docquery/query/deleted-thing", mount_point="secret")
    source = VaultSecretSource(_jwt_session(bao, "docquery-query", "docquery-query"), kv_path="docquery/query")
    assert source.get_text("deleted-thing") is None


def test_other_workloads_path_is_denied(bao: Bao) -> None:
    session = _jwt_session(bao, "docquery-query", "docquery-query")
    source = VaultSecretSource(session, kv_path="docquery/ingest")
    with pytest.raises(VaultError) as err:
        source.get_text("qdrant-api-key")
    assert err.value.status == 403
    assert "ingest-qdrant" not in str(err.value)
    # A denial with a fresh token is a policy answer: no login storm.
    assert session.stats.logins == 1


def test_approle_login(bao: Bao, tmp_path: Path) -> None:
    root = bao.root()
    root.auth.approle.create_or_update_approle(
        "docquery-cli", token_policies=["vllm"], token_no_default_policy=True, token_ttl="1m", token_max_ttl="2m"
    )
    role_id = root.auth.approle.read_role_id("docquery-cli")["data"]["role_id"]
    secret_id_file = tmp_path / "vault-approle-secret-id"
    secret_id_file.write_text(root.auth.approle.generate_secret_id("docquery-cli")["data"]["secret_id"])
    session = VaultSession(
        hvac.Client(url=bao.url), Login("approle", role=role_id, credential_path=str(secret_id_file))
    )
    value = VaultSecretSource(session, kv_path="docquery/vllm").get_text("api-key")
    assert value is not None
    assert value.get_secret_value() == "vllm-key-v1"


def test_renewal_before_expiry(bao: Bao) -> None:
    bao.add_jwt_role("short-renew", "docquery-vllm", "vllm", ttl="4s", max_ttl="30s")
    now = [0.0]
    session = _jwt_session(bao, "short-renew", "docquery-vllm", renew_fraction=0.5, clock=lambda: now[0])
    source = VaultSecretSource(session, kv_path="docquery/vllm", refresh_s=0.0, clock=lambda: now[0])
    assert source.get_text("api-key") is not None
    token = session.client().token
    now[0] = 2.5  # our clock: 1.5 s of 4 s left, below half, so the next use renews (server: ~4 s left)
    assert source.get_text("api-key") is not None
    assert (session.stats.renewals, session.stats.logins) == (1, 1)
    assert session.client().token == token  # the same token, extended on the server
    lookup = bao.root().auth.token.lookup(token)["data"]
    assert lookup["ttl"] >= 3
    assert lookup["last_renewal_time"]


def test_kubernetes_method_login_is_attempted(bao: Bao) -> None:
    """The kubernetes method reaches Vault with the projected token; Vault's TokenReview
    needs a kube-apiserver that cannot run here, so the answer is a denial (see conftest)."""
    jwt_file = bao.write_sa_jwt("docquery-query")
    session = VaultSession(
        hvac.Client(url=bao.url), Login("kubernetes", role="docquery-query", credential_path=str(jwt_file))
    )
    with pytest.raises(VaultError) as err:
        session.client()
    assert err.value.operation == "login (kubernetes)"
    assert err.value.status in (403, 500)


def test_relogin_when_renewal_fails(bao: Bao) -> None:
    now = [0.0]
    session = _jwt_session(bao, "docquery-vllm", "docquery-vllm", clock=lambda: now[0])
    source = VaultSecretSource(session, kv_path="docquery/vllm", refresh_s=0.0, clock=lambda: now[0])
    assert source.get_text("api-key") is not None
    old = session.client().token
    bao.root().auth.token.revoke(old)
    now[0] = 3000.0  # 1h TTL: past half, so the next use renews, which fails on a revoked token
    assert source.get_text("api-key") is not None
    assert session.stats.renew_failures == 1
    assert session.stats.logins == 2
    assert session.client().token != old


def test_relogin_after_token_expired_at_max_ttl(bao: Bao) -> None:
    bao.add_jwt_role("short-max", "docquery-vllm", "vllm", ttl="1s", max_ttl="2s")
    session = _jwt_session(bao, "short-max", "docquery-vllm", expiry_margin_s=0.2)
    source = VaultSecretSource(session, kv_path="docquery/vllm", refresh_s=0.0)
    assert source.get_text("api-key") is not None
    first = session.client().token
    deadline = time.monotonic() + 2.6
    while time.monotonic() < deadline:  # keep using it across its whole life
        assert source.get_text("api-key") is not None
        time.sleep(0.1)
    assert _refused_within(bao, first, seconds=5.0)  # the server expired it (its clock, not ours)
    assert session.stats.logins >= 2
    assert source.get_text("api-key") is not None


def _refused_within(bao: Bao, token: str, *, seconds: float) -> bool:
    """Vault revokes expired tokens in the background; on a loaded machine that can lag the TTL."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            bao.client_with_token(token).auth.token.lookup_self()
        except hvac.exceptions.Forbidden:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_relogin_when_server_denies_a_token_we_thought_valid(bao: Bao) -> None:
    now = [0.0]
    session = _jwt_session(bao, "docquery-vllm", "docquery-vllm", clock=lambda: now[0])
    source = VaultSecretSource(session, kv_path="docquery/vllm", refresh_s=0.0, clock=lambda: now[0])
    assert source.get_text("api-key") is not None
    bao.root().auth.token.revoke(session.client().token)
    now[0] = 2.0  # past the "fresh token" guard that stops login storms on real denials; no renewal due
    assert source.get_text("api-key") is not None
    assert session.stats.relogins_after_denied == 1


def test_build_secret_source_picks_vault(bao: Bao) -> None:
    jwt_file = bao.write_sa_jwt("docquery-query")
    settings = Settings(
        vault={
            "url": bao.url,
            "auth_method": "jwt",
            "auth_mount": "jwt",
            "role": "docquery-query",
            "jwt_path": str(jwt_file),
            "kv_path": "docquery/query",
        },
        profile="prod",
    )
    source = build_secret_source(settings, environ={})
    assert isinstance(source, VaultSecretSource)
    value = source.get_text("llm-api-key")
    assert value is not None
    assert value.get_secret_value() == bao.kv_secrets["query"]["llm-api-key"]


def test_prod_with_vault_and_a_qdrant_url_reads_the_key_from_vault_not_a_file(bao: Bao, tmp_path: Path) -> None:
    """The Qdrant key used to come from the settings snapshot (a file only); now through the source."""
    jwt_file = bao.write_sa_jwt("docquery-query")
    vault = {
        "url": bao.url,
        "auth_method": "jwt",
        "auth_mount": "jwt",
        "role": "docquery-query",
        "jwt_path": str(jwt_file),
        "kv_path": "docquery/query",
    }
    settings = Settings(
        profile="prod",
        secrets_dir=tmp_path / "no-files-here",
        vault=vault,
        qdrant={"url": "https://qdrant:6333"},
        llm={"base_url": "http://vllm:8000/v1"},
    )
    source = build_secret_source(settings, environ={})
    key = secret_getter(source, "qdrant-api-key")()
    assert key is not None
    assert key.get_secret_value() == bao.kv_secrets["query"]["qdrant-read-only-key"]


def test_prod_with_vault_refuses_a_required_secret_vault_lacks(bao: Bao, tmp_path: Path) -> None:
    jwt_file = bao.write_sa_jwt("docquery-query")
    settings = Settings(
        profile="prod",
        secrets_dir=tmp_path,
        vault={
            "url": bao.url,
            "auth_method": "jwt",
            "auth_mount": "jwt",
            "role": "docquery-query",
            "jwt_path": str(jwt_file),
            "kv_path": "docquery/query",
        },
        embedder={"kind": "openai", "base_url": "http://tei/v1"},  # the query role has no embedder key
    )
    with pytest.raises(MissingSecretError, match="embedder-api-key"):
        build_secret_source(settings, environ={})
