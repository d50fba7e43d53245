"""Every authentication and authorisation failure code, and the prod start refusal."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient

from docquery.api.app import create_app
from docquery.cli import main as cli_main
from docquery.config.settings import Settings
from docquery.core.errors import ConfigError
from docquery.secrets import FileSecretSource
from tests.support.api_harness import AUDIENCE, ISSUER, KEYS, Harness, JwtIssuer, bearer, write_api_keys
from tests.support.clock import ManualClock
from tests.support.fixtures import VACATION, harness_fixture

QUERY = {"question": "what is the vacation policy"}


def _assert_envelope(resp_json: dict[str, object], type_: str) -> None:
    err = resp_json["error"]
    assert isinstance(err, dict)
    assert err["type"] == type_ and err["request_id"] and err["message"]


h = harness_fixture(VACATION)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-known-key"},
        {"Authorization": "Basic dG9rLWFsaWNlLWVuZzp4"},
        {"Authorization": "tok-alice-eng"},
        {"Authorization": "Bearer " + "x" * 20000},
    ],
    ids=["none", "empty", "unknown-key", "basic", "no-scheme", "huge"],
)
def test_401_without_a_valid_api_key(h: Harness, headers: dict[str, str]) -> None:
    r = h.client.post("/v1/query", json=QUERY, headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    _assert_envelope(r.json(), "unauthorized")


def test_valid_api_key_is_accepted(h: Harness) -> None:
    r = h.client.post("/v1/query", json=QUERY, headers=bearer("tok-alice-eng"))
    assert r.status_code == 200
    assert [c["doc_id"] for c in r.json()["citations"]] == ["vac"]


def test_403_valid_key_without_role(h: Harness) -> None:
    for method, path, body in [
        ("POST", "/v1/query", QUERY),
        ("POST", "/v1/search", {"query": "vacation"}),
        ("POST", "/v1/chat/completions", {"model": "docquery", "messages": [{"role": "user", "content": "x"}]}),
        ("GET", "/v1/models", None),
        ("GET", "/v1/documents", None),
    ]:
        r = h.client.request(method, path, json=body, headers=bearer("tok-norole"))
        assert r.status_code == 403, path
        _assert_envelope(r.json(), "forbidden")


def test_delete_needs_admin(h: Harness) -> None:
    h.corpus.add("to-delete", ["A document about deletion."], ["eng"])
    r = h.client.delete("/v1/documents/to-delete", headers=bearer("tok-alice-eng"))
    assert r.status_code == 403
    r = h.client.delete("/v1/documents/to-delete", headers=bearer("tok-root-admin"))
    assert r.status_code == 200 and r.json()["deleted_chunks"] == 1
    r = h.client.delete("/v1/documents/to-delete", headers=bearer("tok-root-admin"))
    assert r.status_code == 404


def test_admin_cannot_delete_what_its_groups_cannot_see(h: Harness) -> None:
    h.corpus.add("secret", ["board minutes"], ["board"])
    r = h.client.delete("/v1/documents/secret", headers=bearer("tok-root-admin"))
    assert r.status_code == 404  # same as a missing document: no existence oracle
    assert h.corpus.index.get_document("secret") is not None


def test_valid_jwt_gives_groups_and_roles(h: Harness, jwt_issuer: JwtIssuer) -> None:
    r = h.client.post("/v1/query", json=QUERY, headers=bearer(jwt_issuer.token()))
    assert r.status_code == 200
    assert [c["doc_id"] for c in r.json()["citations"]] == ["vac"]
    r = h.client.post("/v1/query", json=QUERY, headers=bearer(jwt_issuer.token(groups=["hr"])))
    assert r.status_code == 200 and r.json()["citations"] == []


def _other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize(
    "case",
    [
        "bad-signature",
        "expired",
        "not-yet-valid",
        "wrong-issuer",
        "wrong-audience",
        "unknown-kid",
        "no-exp",
        "valid-for-years",
        "valid-past-the-maximum",
        "alg-none",
        "tampered",
    ],
)
def test_401_for_every_jwt_failure(h: Harness, jwt_issuer: JwtIssuer, case: str) -> None:
    now = int(time.time())
    token = {
        "bad-signature": lambda: jwt_issuer.token(key=_other_key()),
        "expired": lambda: jwt_issuer.token(exp=now - 60, iat=now - 600, nbf=now - 600),
        "not-yet-valid": lambda: jwt_issuer.token(nbf=now + 600),
        "wrong-issuer": lambda: jwt_issuer.token(iss="https://evil.example"),
        "wrong-audience": lambda: jwt_issuer.token(aud="someone-else"),
        "unknown-kid": lambda: jwt_issuer.token(kid="other"),
        "no-exp": lambda: jwt_issuer.token(exp=None),
        "valid-for-years": lambda: jwt_issuer.token(exp=253402300799),  # 9999-12-31: a standing key
        "valid-past-the-maximum": lambda: jwt_issuer.token(exp=now + 86_400 + 30 + 120),
        "alg-none": lambda: jwt.encode(
            {"sub": "x", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60, "roles": ["query"], "groups": ["eng"]},
            key=None,
            algorithm="none",
        ),
        "tampered": lambda: _tamper(jwt_issuer.token()),
    }[case]()
    r = h.client.post("/v1/query", json=QUERY, headers=bearer(token))
    assert r.status_code == 401, case
    _assert_envelope(r.json(), "unauthorized")


def _tamper(token: str) -> str:
    import base64

    head, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["groups"] = ["hr", "board"]  # widen the groups, keep the signature
    new = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{new}.{sig}"


def test_403_valid_jwt_without_role(h: Harness, jwt_issuer: JwtIssuer) -> None:
    r = h.client.post("/v1/query", json=QUERY, headers=bearer(jwt_issuer.token(roles=[])))
    assert r.status_code == 403
    _assert_envelope(r.json(), "forbidden")


def test_request_body_cannot_widen_acl(h: Harness) -> None:
    body = {**QUERY, "groups": ["hr"], "acl": ["hr"]}
    r = h.client.post("/v1/query", json=body, headers=bearer("tok-alice-eng"))
    assert r.status_code == 422


def test_api_key_rotation_is_picked_up(h: Harness, tmp_path: Path) -> None:
    """On a test clock: the new file is seen exactly one stat interval later, with no restart."""
    clock = ManualClock()
    write_api_keys(tmp_path, KEYS)
    app = create_app(h.settings, components=h.components, secrets=FileSecretSource(tmp_path, clock=clock))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/v1/models", headers=bearer("tok-alice-eng")).status_code == 200
        write_api_keys(tmp_path, {"tok-new": ("alice", ["eng"], ["query"])})
        clock.advance(0.25)  # the file source stats at most every 250 ms
        assert client.get("/v1/models", headers=bearer("tok-alice-eng")).status_code == 401
        assert client.get("/v1/models", headers=bearer("tok-new")).status_code == 200


def test_prod_refuses_to_start_without_auth(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    prod = Settings(profile="prod", data_dir=tmp_path / "d", secrets_dir=secrets)
    with pytest.raises(ConfigError, match="refuses to start without authentication"):
        create_app(prod)
    # A JWKS alone is not enough: issuer and audience must be set too.
    (secrets / "jwks.json").write_text(json.dumps(JwtIssuer().jwks()))
    with pytest.raises(ConfigError):
        create_app(prod)
    with_jwt = Settings(
        profile="prod",
        data_dir=tmp_path / "d",
        secrets_dir=secrets,
        auth={"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE},
    )
    assert create_app(with_jwt) is not None
    (secrets / "jwks.json").unlink()
    write_api_keys(secrets, KEYS)
    assert create_app(prod) is not None


def test_serve_exits_2_in_prod_without_auth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    monkeypatch.setenv("DOCQUERY_PROFILE", "prod")
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(secrets))
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("DOCQUERY_METRICS_PORT", "0")  # 9464 may be held by a running `docquery serve`
    assert cli_main(["serve", "--port", "0"]) == 2


def test_a_jwt_valid_for_up_to_the_maximum_lifetime_is_accepted(h: Harness, jwt_issuer: JwtIssuer) -> None:
    token = jwt_issuer.token(exp=int(time.time()) + 86_400 - 60)  # auth.jwt_max_lifetime_s is a day
    assert h.client.post("/v1/query", json=QUERY, headers=bearer(token)).status_code == 200
