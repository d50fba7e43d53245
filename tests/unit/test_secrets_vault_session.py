"""VaultSession token logic (renew below a fraction of the TTL, re-login on failure,
expiry or a late 403) with a fake clock and a fake hvac client."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hvac import exceptions as hvac_exc  # type: ignore[import-untyped, unused-ignore]

from docquery.secrets import SecretsError, SecretUnavailableError
from docquery.secrets.vault import Login, VaultError, VaultSecretSource, VaultSession


class FakeVault:
    """Just enough of hvac.Client: jwt login, renew_self, kv v2 read."""

    def __init__(self, ttl: int = 100, max_ttl: int = 1000) -> None:
        self.ttl = ttl
        self.max_ttl = max_ttl
        self.token: str | None = None
        self.logins = 0
        self.renewals = 0
        self.fail_renew = False
        self.deny_next = 0
        self.kv: dict[str, dict[str, Any]] = {}
        self.kv_reads = 0
        self.auth = SimpleNamespace(
            jwt=SimpleNamespace(jwt_login=self._login),
            token=SimpleNamespace(renew_self=self._renew),
        )
        self.secrets = SimpleNamespace(kv=SimpleNamespace(v2=SimpleNamespace(read_secret_version=self._read)))

    def _login(self, role: str, jwt: str, use_token: bool, path: str) -> dict[str, Any]:
        assert jwt == "sa-jwt"
        assert use_token is False
        self.logins += 1
        return {"auth": {"client_token": f"tok-{self.logins}", "lease_duration": self.ttl, "renewable": True}}

    def _renew(self) -> dict[str, Any]:
        if self.fail_renew:
            raise hvac_exc.Forbidden("permission denied")
        self.renewals += 1
        return {"auth": {"lease_duration": min(self.ttl, self.max_ttl), "renewable": True}}

    def _read(self, path: str, mount_point: str, raise_on_deleted_version: bool) -> dict[str, Any]:
        assert raise_on_deleted_version is True
        self.kv_reads += 1
        if self.deny_next:
            self.deny_next -= 1
            raise hvac_exc.Forbidden("permission denied")
        if path not in self.kv:
            raise hvac_exc.InvalidPath()
        return {"data": self.kv[path]}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def jwt_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("sa-jwt\n")
    return path


def _session(fake: FakeVault, jwt_file: Path, clock: Clock, **kw: float) -> VaultSession:
    return VaultSession(fake, Login("jwt", role="r", credential_path=str(jwt_file)), clock=clock, **kw)


def test_first_use_logs_in(jwt_file: Path) -> None:
    fake, clock = FakeVault(), Clock()
    session = _session(fake, jwt_file, clock)
    assert session.client() is fake
    assert fake.token == "tok-1"
    assert (fake.logins, fake.renewals) == (1, 0)


def test_no_renewal_while_more_than_the_fraction_is_left(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    session = _session(fake, jwt_file, clock, renew_fraction=0.5)
    session.client()
    clock.now = 49.0
    session.client()
    assert fake.renewals == 0


def test_renews_below_the_fraction_and_extends(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    session = _session(fake, jwt_file, clock, renew_fraction=0.5)
    session.client()
    clock.now = 51.0
    session.client()
    assert (fake.logins, fake.renewals) == (1, 1)
    clock.now = 140.0  # 51 + 100 = 151 is the new expiry: 11 s left, renew again
    session.client()
    assert (fake.logins, fake.renewals) == (1, 2)
    assert session.stats.renewals == 2


def test_failed_renewal_logs_in_again(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    session = _session(fake, jwt_file, clock)
    session.client()
    fake.fail_renew = True
    clock.now = 60.0
    session.client()
    assert fake.logins == 2
    assert fake.token == "tok-2"
    assert session.stats.renew_failures == 1


def test_renewal_capped_by_max_ttl_logs_in_again(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    session = _session(fake, jwt_file, clock)
    session.client()
    fake.max_ttl = 5  # the server grants only what is left of max_ttl
    clock.now = 60.0
    session.client()
    assert fake.logins == 2
    assert fake.renewals == 1


def test_expired_token_is_not_renewed_but_replaced(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    session = _session(fake, jwt_file, clock, expiry_margin_s=1.0)
    session.client()
    clock.now = 99.5  # inside the margin: treat as expired
    session.client()
    assert (fake.logins, fake.renewals) == (2, 0)


def test_non_expiring_token_is_never_renewed(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=0), Clock()
    session = _session(fake, jwt_file, clock)
    session.client()
    clock.now = 1e9
    session.client()
    assert (fake.logins, fake.renewals) == (1, 0)


def test_late_403_relogs_in_once_and_retries(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    fake.kv["p/x"] = {"data": {"value": "v"}, "metadata": {"version": 3}}
    session = _session(fake, jwt_file, clock)
    source = VaultSecretSource(session, kv_path="p", refresh_s=0.0, clock=clock)
    assert source.version("x") == 3
    fake.deny_next = 1  # revoked server-side
    clock.now = 10.0
    value = source.get_text("x")
    assert value is not None
    assert value.get_secret_value() == "v"
    assert session.stats.relogins_after_denied == 1


def test_403_on_a_fresh_token_is_a_denial(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    session = _session(fake, jwt_file, clock)
    source = VaultSecretSource(session, kv_path="p", refresh_s=0.0, clock=clock)
    fake.deny_next = 5
    with pytest.raises(VaultError) as err:
        source.get_text("x")
    assert err.value.status == 403
    assert fake.logins == 1


def test_persistent_403_after_relogin_is_raised(jwt_file: Path) -> None:
    fake, clock = FakeVault(ttl=100), Clock()
    fake.kv["p/x"] = {"data": {"value": "v"}, "metadata": {"version": 1}}
    session = _session(fake, jwt_file, clock)
    source = VaultSecretSource(session, kv_path="p", refresh_s=0.0, clock=clock)
    source.get_text("x")
    clock.now = 10.0
    fake.deny_next = 2
    with pytest.raises(VaultError) as err:
        source.get_text("x")
    assert "tok-" not in str(err.value)
    assert fake.logins == 2


def test_kv_cache_and_json(jwt_file: Path) -> None:
    fake, clock = FakeVault(), Clock()
    fake.kv["docquery/query/api-keys"] = {"data": {"value": "[1, 2]"}, "metadata": {"version": 1}}
    fake.kv["docquery/query/jwks"] = {"data": {"value": {"keys": []}}, "metadata": {"version": 1}}
    fake.kv["docquery/query/qdrant-read-only-key"] = {"data": {"value": "ro"}, "metadata": {"version": 1}}
    source = VaultSecretSource(_session(fake, jwt_file, clock), kv_path="docquery/query", refresh_s=30, clock=clock)
    first = source.get_json("api-keys.json")
    assert first == [1, 2]
    assert source.get_json("api-keys.json") is first
    assert source.get_json("jwks.json") == {"keys": []}
    ro = source.get_text("qdrant-api-key")  # alias for the query workload
    assert ro is not None
    assert ro.get_secret_value() == "ro"
    reads = fake.kv_reads
    source.get_json("api-keys.json")
    assert fake.kv_reads == reads  # within refresh_s


def test_missing_credential_file_names_the_path(tmp_path: Path) -> None:
    session = VaultSession(FakeVault(), Login("jwt", role="r", credential_path=str(tmp_path / "none")))
    with pytest.raises(SecretUnavailableError) as err:
        session.client()
    assert "none" in str(err.value)


def test_login_needs_a_role(jwt_file: Path) -> None:
    with pytest.raises(SecretsError):
        VaultSession(FakeVault(), Login("jwt", credential_path=str(jwt_file))).client()


def test_renew_fraction_validated() -> None:
    with pytest.raises(ValueError):
        VaultSession(FakeVault(), Login("jwt"), renew_fraction=1.5)
