"""deploy/k8s/resolve-pins.py offline: what it reads from the pins, how it asks a
registry (a stand-in speaking the distribution API's token challenge), crane and
skopeo (stand-in runners), and what it reports and rewrites."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import deploy_support as ds
import pytest

_spec = importlib.util.spec_from_file_location("dq_pins", ds.K8S / "resolve-pins.py")
assert _spec and _spec.loader
pins = importlib.util.module_from_spec(_spec)
sys.modules["dq_pins"] = pins
_spec.loader.exec_module(pins)

D1, D2, D3 = ("sha256:" + c * 64 for c in "123")


def test_reads_every_pin_of_the_bundle() -> None:
    found = pins.load_pins(pins.PINS.read_text())
    repos = {p.repo: p for p in found}
    assert set(repos) == {
        "registry.example.com/docquery/docquery",
        "docker.io/qdrant/qdrant",
        "docker.io/vllm/vllm-openai",
        "ghcr.io/oras-project/oras",
        "docker.io/nginxinc/nginx-unprivileged",
        "docker.io/hashicorp/vault",  # from the agent-image patches, once
    }
    assert repos["docker.io/qdrant/qdrant"].tag == "v1.19.0-unprivileged"
    assert repos["docker.io/hashicorp/vault"].tag == "2.0.4"
    assert repos["docker.io/vllm/vllm-openai"].tag is None


def test_every_rendered_image_is_a_pin(renderings: dict[str, ds.Rendering]) -> None:
    """The script checks what the bundle deploys: no rendered image escapes it."""
    refs = {
        f"{p.repo}:{p.tag}@{p.digest}" if p.tag else f"{p.repo}@{p.digest}"
        for p in pins.load_pins(pins.PINS.read_text())
    }
    for r in renderings.values():
        for w in ds.workloads(r.docs):
            for c in w.pod.containers():
                assert c["image"] in refs, (r.name, w.name, c["image"])
            agent = w.pod.annotations.get("vault.hashicorp.com/agent-image")
            assert agent is None or agent in refs, agent


@pytest.mark.parametrize(
    ("repo", "host", "path"),
    [
        ("docker.io/qdrant/qdrant", "registry-1.docker.io", "qdrant/qdrant"),
        ("docker.io/nginx", "registry-1.docker.io", "library/nginx"),
        ("nginx", "registry-1.docker.io", "library/nginx"),
        ("vllm/vllm-openai", "registry-1.docker.io", "vllm/vllm-openai"),
        ("ghcr.io/oras-project/oras", "ghcr.io", "oras-project/oras"),
        ("localhost:5000/a/b", "localhost:5000", "a/b"),
    ],
)
def test_split_ref(repo: str, host: str, path: str) -> None:
    assert pins.split_ref(repo) == (host, path)


@pytest.mark.parametrize("text", ["images: [{name: a, digest: 'sha256:abc'}]", "images: [{name: a, newTag: v1}]"])
def test_a_malformed_pin_is_refused(text: str) -> None:
    with pytest.raises(pins.ResolveError, match="is not sha256"):
        pins.load_pins(text)


class Registry(BaseHTTPRequestHandler):
    manifests: ClassVar[dict[str, str]] = {}
    token = "t0ken"

    def log_message(self, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            host = self.headers["Host"]
            self.send_header(
                "WWW-Authenticate", f'Bearer realm="http://{host}/token",service="reg",scope="repository:x:pull"'
            )
            self.end_headers()
            return
        digest = self.manifests.get(self.path)
        self.send_response(200 if digest else 404)
        if digest:
            assert "application/vnd.oci.image.index.v1+json" in self.headers["Accept"]
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()

    def do_GET(self) -> None:
        assert self.path.startswith("/token?") and "service=reg" in self.path and "scope=" in self.path
        body = json.dumps({"token": self.token}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def registry() -> Iterator[str]:
    Registry.manifests = {"/v2/qdrant/qdrant/manifests/v1.19.0": D2}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_registry_api_with_a_token_challenge(registry: str) -> None:
    pin = pins.Pin(f"{registry}/qdrant/qdrant", "v1.19.0", D1)
    assert pins.resolve_api(pin, scheme="http") == D2
    with pytest.raises(pins.ResolveError, match="HTTP 404"):
        pins.resolve_api(pins.Pin(f"{registry}/qdrant/qdrant", "v9", D1), scheme="http")
    with pytest.raises(pins.ResolveError, match="unreachable"):
        pins.resolve_api(pins.Pin("127.0.0.1:1/a/b", "v1", D1), scheme="http")


def test_crane_and_skopeo_are_asked_as_documented() -> None:
    calls: list[list[str]] = []
    raw = b'{"schemaVersion":2,"manifests":[]}'

    def run(cmd: list[str]) -> tuple[int, bytes]:
        calls.append(cmd)
        return (0, (D3 + "\n").encode()) if cmd[0] == "crane" else (0, raw)

    pin = pins.Pin("docker.io/qdrant/qdrant", "v1.19.0-unprivileged", D1)
    assert pins.resolve_crane(pin, run) == D3
    assert pins.resolve_skopeo(pin, run) == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert calls == [
        ["crane", "digest", "docker.io/qdrant/qdrant:v1.19.0-unprivileged"],
        ["skopeo", "inspect", "--raw", "docker://docker.io/qdrant/qdrant:v1.19.0-unprivileged"],
    ]
    with pytest.raises(pins.ResolveError, match="crane digest"):
        pins.resolve_crane(pin, lambda _c: (1, b""))


def test_report_and_rewrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = pins.PINS.read_text()
    copy = tmp_path / "kustomization.yaml"
    copy.write_text(text)
    current = {p.repo: p.digest for p in pins.load_pins(text)}
    registry = {repo: ("sha256:" + hashlib.sha256(repo.encode()).hexdigest()) for repo in current}
    registry["docker.io/qdrant/qdrant"] = current["docker.io/qdrant/qdrant"]  # one already right

    def resolve(pin: Any) -> str:
        if pin.repo == "ghcr.io/oras-project/oras":
            raise pins.ResolveError("ghcr.io/oras-project/oras:v1.2.0: HTTP 404 from ghcr.io")
        return registry[pin.repo]

    assert pins.main([], resolver=resolve, pins_file=copy) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["differs", "ok", "no", "error", "no", "differs"]
    assert copy.read_text() == text  # no --write, nothing changed
    assert pins.main(["--write"], resolver=resolve, pins_file=copy) == 1
    rewritten = pins.load_pins(copy.read_text())
    by_repo = {p.repo: p.digest for p in rewritten}
    assert by_repo["registry.example.com/docquery/docquery"] == registry["registry.example.com/docquery/docquery"]
    assert by_repo["docker.io/hashicorp/vault"] == registry["docker.io/hashicorp/vault"]
    assert copy.read_text().count(registry["docker.io/hashicorp/vault"]) == 3  # every agent-image patch
    assert "# NOTE: the digests below" in copy.read_text()  # comments kept
    capsys.readouterr()


def test_a_shared_placeholder_is_not_rewritten_blindly() -> None:
    shared = [pins.Pin("a.io/x", "1", D1), pins.Pin("a.io/y", "1", D1)]
    lines, changes = pins.check(shared, lambda p: D2 if p.repo.endswith("x") else D3)
    assert changes == {D1: D2}
    assert lines[1].startswith("error") and "edit it by hand" in lines[1]
