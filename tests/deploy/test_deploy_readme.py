"""deploy/k8s/README.md: the first install works as written, and the prerequisites are stated."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import deploy_support as ds

README = (ds.K8S / "README.md").read_text()
SHELL_BLOCKS = re.findall(r"```sh\n(.*?)```", README, flags=re.S)


def _commands() -> list[list[str]]:
    out = []
    for block in SHELL_BLOCKS:
        for raw in block.replace("\\\n", " ").splitlines():
            line = raw.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(shlex.split(line, comments=True))
    return out


def test_every_kustomization_path_exists_from_the_repo_root(kubectl: Path) -> None:
    """The install section says: every command runs from the repository root."""
    assert "Every command runs from the repository root" in README
    seen = 0
    for words in _commands():
        for flag in ("-k", "kustomize"):
            if flag in words and words.index(flag) + 1 < len(words):
                target = words[words.index(flag) + 1]
                if target.startswith(("deploy/", "policies/")):
                    assert (ds.REPO / target / "kustomization.yaml").is_file(), target
                    ds.render(kubectl, ds.REPO / target)  # renders as written
                    seen += 1
    assert seen >= 5


def test_no_placeholder_is_a_shell_redirection() -> None:
    """`<digest>` in a command is input redirection from a file named digest: use variables."""
    for block in SHELL_BLOCKS:
        for raw in block.splitlines():
            line = raw.split(" #", 1)[0]
            assert not re.search(r"<[A-Za-z][\w-]*>", line), raw
    rotation = README.split("## Rotating keys", 1)[1].split("\n## ", 1)[0]
    for code in re.findall(r"`([^`]+)`", rotation):
        if code.startswith(("vault ", "kubectl ")):
            assert not re.search(r"<[A-Za-z][\w-]*>", code), code


def test_the_install_order_applies_the_overlay_before_the_ingest_run() -> None:
    flat = [" ".join(w) for w in _commands()]
    overlay = flat.index("kubectl apply -k deploy/k8s/overlays/prod")
    ingest = flat.index("kubectl apply -k deploy/k8s/overlays/prod/ingest")
    smoke = next(i for i, c in enumerate(flat) if "/v1/models" in c)
    assert overlay < smoke < ingest


def test_vault_setup_names_real_policy_files_and_every_role() -> None:
    loop = next(w for w in _commands() if w[:2] == ["for", "p"])
    names = loop[3 : loop.index("do")]
    names = [n.rstrip(";") for n in names]
    for n in names:
        assert (ds.POLICIES / "vault" / f"{n}.hcl").is_file(), n
    assert set(names) == {"query", "upload", "ingest", "vllm", "vllm-embed", "qdrant", "qdrant-backup"}


def test_prerequisites_are_stated() -> None:
    needs = README.split("## What the cluster needs", 1)[1].split("\n## ", 1)[0]
    for needle in (
        "Gateway API",
        "ingress-nginx was retired",
        "gateway.networking.k8s.io/gateway-name",
        "NOT for GPU nodes",
        "vault.hashicorp.com/tls-secret",
        "vault.hashicorp.com/ca-cert",
        "NodeLocal DNSCache",
        "169.254.20.10",
        "v25.12.0",
    ):
        assert needle in needs or needle in README, needle
    assert "serverAuth" in README and "clientAuth" in README


def test_the_query_policy_admits_the_gateway_not_ingress_nginx(renderings: dict[str, ds.Rendering]) -> None:
    np = renderings["overlay-prod"].get("NetworkPolicy", "docquery-query")
    peers = [p for rule in np["spec"]["ingress"] for p in rule["from"]]
    assert {"matchLabels": {"gateway.networking.k8s.io/gateway-name": "docquery"}} in [
        p.get("podSelector") for p in peers
    ]
    assert "ingress-nginx" not in str(np)
