"""components/qdrant-backup/backup.py against a stand-in Qdrant (the REST calls of
qdrant/qdrant v1.19.0 src/actix/api/snapshot_api.rs: create, download, delete, upload)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import deploy_support as ds
import pytest

_spec = importlib.util.spec_from_file_location("dq_backup", ds.K8S / "components" / "qdrant-backup" / "backup.py")
assert _spec and _spec.loader
backup = importlib.util.module_from_spec(_spec)
sys.modules["dq_backup"] = backup
_spec.loader.exec_module(backup)

KEY = "k" * 64


class Peer:
    """One Qdrant peer's snapshot endpoints, with its local shards as bytes."""

    def __init__(self, index: int) -> None:
        self.data = f"shards of peer {index}".encode() * 1000
        self.snapshots: dict[str, bytes] = {}
        self.uploads: list[tuple[str, bytes]] = []
        self.fail: str | None = None  # "create", "download", "checksum"
        self.calls: list[str] = []


def _handler(peers: dict[str, Peer]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _peer(self) -> Peer | None:
            if self.headers.get("api-key") != KEY:
                self.send_response(401)
                self.end_headers()
                return None
            peer = peers[self.path.split("/")[1]]
            peer.calls.append(f"{self.command} {self.path}")
            return peer

        def _json(self, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            peer = self._peer()
            if peer is None:
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if "/snapshots/upload" in self.path:
                peer.uploads.append((self.path, body))
                self._json({"result": True, "status": "ok"})
                return
            if peer.fail == "create":
                self.send_response(500)
                self.end_headers()
                return
            name = f"docquery-{len(peer.snapshots)}.snapshot"
            peer.snapshots[name] = peer.data
            checksum = hashlib.sha256(b"other" if peer.fail == "checksum" else peer.data).hexdigest()
            self._json({"result": {"name": name, "size": len(peer.data), "checksum": checksum}, "status": "ok"})

        def do_GET(self) -> None:
            peer = self._peer()
            if peer is None:
                return
            name = self.path.rsplit("/", 1)[1]
            if peer.fail == "download" or name not in peer.snapshots:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(peer.snapshots[name])))
            self.end_headers()
            self.wfile.write(peer.snapshots[name])

        def do_DELETE(self) -> None:
            peer = self._peer()
            if peer is None:
                return
            peer.snapshots.pop(self.path.split("?")[0].rsplit("/", 1)[1], None)
            self._json({"result": True, "status": "ok"})

    return Handler


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[str], dict[str, Peer], dict[str, str]]]:
    peers = {f"p{i}": Peer(i) for i in range(3)}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(peers))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    urls = [f"{base}/{name}" for name in peers]
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    env = {"QDRANT_PEERS": ",".join(urls), "QDRANT_API_KEY_FILE": str(key), "BACKUP_DIR": str(tmp_path / "b")}
    (tmp_path / "b").mkdir()
    yield urls, peers, env
    server.shutdown()
    server.server_close()


def test_every_peer_is_saved_checked_and_cleaned_up(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    urls, peers, env = cluster
    assert backup.main([], env) == 0
    out = json.loads(capsys.readouterr().out)
    target = Path(env["BACKUP_DIR"]) / out["backup"]
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["complete"] is True and manifest["collection"] == "docquery"
    assert [p["peer"] for p in manifest["peers"]] == urls
    for entry, peer in zip(manifest["peers"], peers.values(), strict=True):
        assert (target / entry["file"]).read_bytes() == peer.data
        assert entry["sha256"] == hashlib.sha256(peer.data).hexdigest()
        assert peer.snapshots == {}  # deleted from the peer's disk
        assert peer.calls[0].startswith("POST /p") and "/collections/docquery/snapshots?wait=true" in peer.calls[0]


@pytest.mark.parametrize("failure", ["create", "download", "checksum"])
def test_a_failed_peer_is_reported_and_the_others_kept(
    cluster: Any, capsys: pytest.CaptureFixture[str], failure: str
) -> None:
    _urls, peers, env = cluster
    peers["p1"].fail = failure
    assert backup.main([], env) == 1
    captured = capsys.readouterr()
    assert captured.err.count("error:") == 1 and KEY not in captured.err
    target = Path(env["BACKUP_DIR"]) / json.loads(captured.out)["backup"]
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["complete"] is False
    assert [p["index"] for p in manifest["peers"]] == [0, 2]
    assert not (target / "peer-1.snapshot").exists()


def test_pruning_keeps_the_newest_complete_backups(tmp_path: Path) -> None:
    for i, complete in enumerate([True, True, False, True, True, False]):
        d = tmp_path / f"2026120{i}T000000Z"
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"complete": complete}))
    removed = backup.prune(tmp_path, 2)
    assert removed == ["20261200T000000Z", "20261201T000000Z", "20261202T000000Z"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["20261203T000000Z", "20261204T000000Z", "20261205T000000Z"]
    assert backup.prune(tmp_path, 2) == []


def test_restore_uploads_each_file_to_its_peer_with_its_checksum(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _urls, peers, env = cluster
    assert backup.main([], env) == 0
    name = json.loads(capsys.readouterr().out)["backup"]
    assert backup.main([], {**env, "RESTORE_FROM": name}) == 0
    for peer in peers.values():
        [(path, body)] = peer.uploads
        assert "/collections/docquery/snapshots/upload?" in path
        assert f"checksum={hashlib.sha256(peer.data).hexdigest()}" in path and "priority=snapshot" in path
        assert b'name="snapshot"' in body and peer.data in body


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"QDRANT_PEERS": ""}, "QDRANT_PEERS is empty"),
        ({"QDRANT_PEERS": "file:///etc/passwd"}, "is not an http(s) URL"),
        ({"KEEP": "0"}, "KEEP must be a whole number"),
        ({"QDRANT_API_KEY_FILE": "/nonexistent"}, "cannot read the API key file"),
        ({"RESTORE_FROM": "../etc"}, "RESTORE_FROM must name a backup directory"),
        ({"RESTORE_FROM": "20990101T000000Z"}, "cannot read the manifest"),
    ],
)
def test_setting_errors_are_one_line_exit_2(
    cluster: Any, capsys: pytest.CaptureFixture[str], change: dict[str, str], message: str
) -> None:
    _urls, _peers, env = cluster
    assert backup.main([], {**env, **change}) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_restore_refuses_an_incomplete_backup_or_another_layout(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    urls, peers, env = cluster
    peers["p2"].fail = "create"
    assert backup.main([], env) == 1
    name = json.loads(capsys.readouterr().out)["backup"]
    assert backup.main([], {**env, "RESTORE_FROM": name}) == 2
    assert "incomplete" in capsys.readouterr().err
    peers["p2"].fail = None
    assert backup.main([], env) == 0
    name = json.loads(capsys.readouterr().out)["backup"]
    assert backup.main([], {**env, "RESTORE_FROM": name, "QDRANT_PEERS": ",".join(urls[:2])}) == 2
    assert "restore needs the same layout" in capsys.readouterr().err


def test_the_cronjob_runs_this_script_with_its_settings(renderings: dict[str, ds.Rendering]) -> None:
    r = renderings["component-qdrant-backup"]
    cron = r.get("CronJob", "docquery-qdrant-backup")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["command"] == ["python", "/etc/qdrant-backup/backup.py"]
    script_cm = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    cm = r.get("ConfigMap", script_cm)
    assert cm["data"]["backup.py"] == (ds.K8S / "components" / "qdrant-backup" / "backup.py").read_text()
    settings = r.get("ConfigMap", "docquery-qdrant-backup")["data"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert {"QDRANT_PEERS", "QDRANT_COLLECTION", "KEEP", "RESTORE_FROM"} <= set(settings)
    assert env["QDRANT_API_KEY_FILE"] == "/vault/secrets/qdrant-api-key"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    # Every peer the StatefulSet runs (with qdrant-cluster) is in QDRANT_PEERS.
    replicas = renderings["component-qdrant-cluster"].get("StatefulSet", "docquery-qdrant")["spec"]["replicas"]
    assert len(settings["QDRANT_PEERS"].split(",")) == replicas
    labels = cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    qdrant = {"app.kubernetes.io/name": "docquery-qdrant"}
    assert ds.tcp_allowed(r.docs, labels, qdrant, 6333)
