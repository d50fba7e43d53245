"""Back up a Qdrant collection from every peer onto a volume (run by the qdrant-backup CronJob).

A collection snapshot holds only the shards of the peer that takes it, so each
peer is asked in turn: create a snapshot (POST /collections/{c}/snapshots),
download it, check its SHA-256 against the one Qdrant reports, delete it from
the peer, and record it in a manifest.json beside the files. The oldest backups
beyond KEEP are removed. Restore (README, "Qdrant backup and restore") uploads
each peer's file back to that peer: the same CronJob's template, run once with
RESTORE_FROM set to a backup's directory name.

Settings (env): QDRANT_PEERS (comma-separated base URLs), QDRANT_COLLECTION,
QDRANT_API_KEY_FILE, BACKUP_DIR, KEEP, RESTORE_FROM. Exit 0 when every peer was
saved (or restored), 1 when one failed (a backup keeps the others), 2 on a
setting error. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
TIMEOUT_S = 600


class BackupError(Exception):
    pass


class SettingError(BackupError):
    """A setting is wrong: retrying cannot help."""


@dataclass(frozen=True)
class Settings:
    peers: list[str]
    collection: str
    api_key: str
    backup_dir: Path
    keep: int

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Settings:
        peers = [p.strip().rstrip("/") for p in env.get("QDRANT_PEERS", "").split(",") if p.strip()]
        if not peers:
            raise SettingError("QDRANT_PEERS is empty: set the peers' base URLs, comma-separated")
        for p in peers:
            if urllib.parse.urlsplit(p).scheme not in ("http", "https"):
                raise SettingError(f"QDRANT_PEERS: {p!r} is not an http(s) URL")
        key_file = Path(env.get("QDRANT_API_KEY_FILE", "/vault/secrets/qdrant-api-key"))
        try:
            key = key_file.read_text().strip()
        except OSError:
            raise SettingError(f"cannot read the API key file {key_file}") from None
        keep = env.get("KEEP", "7")
        if not keep.isdigit() or int(keep) < 1:
            raise SettingError(f"KEEP must be a whole number >= 1, not {keep!r}")
        return cls(
            peers, env.get("QDRANT_COLLECTION", "docquery"), key, Path(env.get("BACKUP_DIR", "/backup")), int(keep)
        )


def _request(settings: Settings, method: str, url: str) -> Any:
    req = urllib.request.Request(url, method=method, headers={"api-key": settings.api_key})  # noqa: S310
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 - URLs from QDRANT_PEERS, checked
    except urllib.error.HTTPError as exc:
        raise BackupError(f"{method} {_public(url)}: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise BackupError(f"{method} {_public(url)}: {type(exc).__name__}") from None


def _public(url: str) -> str:
    """The URL without its query string, for messages."""
    return urllib.parse.urlsplit(url)._replace(query="").geturl()


def _collection_url(settings: Settings, peer: str) -> str:
    return f"{peer}/collections/{urllib.parse.quote(settings.collection, safe='')}/snapshots"


def save_peer(settings: Settings, peer: str, index: int, target: Path) -> dict[str, Any]:
    base = _collection_url(settings, peer)
    with _request(settings, "POST", f"{base}?wait=true") as resp:
        description = json.load(resp).get("result") or {}
    name = description.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise BackupError(f"POST {base}: no snapshot name in the answer")
    url = f"{base}/{urllib.parse.quote(name, safe='')}"
    path = target / f"peer-{index}.snapshot"
    digest = hashlib.sha256()
    with _request(settings, "GET", url) as resp, path.open("wb") as out:
        while chunk := resp.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    expected = description.get("checksum")
    if expected and expected != digest.hexdigest():
        path.unlink()
        raise BackupError(f"GET {url}: checksum mismatch, download discarded")
    with _request(settings, "DELETE", f"{url}?wait=true"):
        pass
    return {"peer": peer, "index": index, "name": name, "file": path.name, "sha256": digest.hexdigest()}


def _complete(d: Path) -> bool:
    try:
        return bool(json.loads((d / "manifest.json").read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def prune(backup_dir: Path, keep: int) -> list[str]:
    """Keep the newest `keep` complete backups and anything newer; remove what is older."""
    dirs = sorted(p for p in backup_dir.iterdir() if p.is_dir())
    complete = [d for d in dirs if _complete(d)]
    if len(complete) <= keep:
        return []
    oldest_kept = complete[-keep]
    removed = [d.name for d in dirs if d < oldest_kept]
    for name in removed:
        shutil.rmtree(backup_dir / name)
    return removed


def backup(settings: Settings, now: float | None = None) -> tuple[Path, list[str]]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    target = settings.backup_dir / stamp
    n = 0
    while target.exists():  # a manual run in the same second as another
        n += 1
        target = settings.backup_dir / f"{stamp}-{n}"
    target.mkdir(parents=True)
    saved: list[dict[str, Any]] = []
    errors: list[str] = []
    for index, peer in enumerate(settings.peers):
        try:
            saved.append(save_peer(settings, peer, index, target))
        except BackupError as exc:
            errors.append(str(exc))
    manifest = {"collection": settings.collection, "created": stamp, "complete": not errors, "peers": saved}
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return target, errors


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        raise SettingError(f"cannot read the manifest {path}") from None
    if not manifest.get("complete"):
        raise SettingError(f"{path}: this backup is incomplete (a peer failed); restore another")
    return dict(manifest)


def _upload(settings: Settings, url: str, path: Path) -> None:
    """POST the file as the multipart field ``snapshot``, streamed from disk."""
    boundary = "docquery-" + hashlib.sha256(path.name.encode()).hexdigest()[:24]
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="snapshot"; filename="{path.name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Any:
        yield head
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk
        yield tail

    headers = {
        "api-key": settings.api_key,
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(len(head) + path.stat().st_size + len(tail)),
    }
    req = urllib.request.Request(url, data=body(), method="POST", headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S):  # noqa: S310 - URLs from QDRANT_PEERS, checked
            pass
    except urllib.error.HTTPError as exc:
        raise BackupError(f"POST {_public(url)}: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise BackupError(f"POST {_public(url)}: {type(exc).__name__}") from None


def restore(settings: Settings, name: str) -> int:
    """Upload each peer's file back to that peer; Qdrant checks the SHA-256 it is given."""
    if not name or "/" in name or name.startswith("."):
        raise SettingError(f"RESTORE_FROM must name a backup directory, not {name!r}")
    target = settings.backup_dir / name
    manifest = read_manifest(target / "manifest.json")
    recorded = [p["peer"] for p in manifest["peers"]]
    if recorded != settings.peers:
        raise SettingError(
            f"{name} was taken from peers {recorded}; QDRANT_PEERS differs: restore needs the same layout"
        )
    c = urllib.parse.quote(manifest["collection"], safe="")
    for p in manifest["peers"]:
        url = f"{p['peer']}/collections/{c}/snapshots/upload?wait=true&priority=snapshot&checksum={p['sha256']}"
        _upload(settings, url, target / p["file"])
    return len(manifest["peers"])


def main(argv: list[str], env: dict[str, str]) -> int:
    if argv:
        sys.stderr.write("error: backup.py takes no arguments; settings come from the environment\n")
        return 2
    try:
        settings = Settings.from_env(env)
        if env.get("RESTORE_FROM"):
            peers = restore(settings, env["RESTORE_FROM"])
            sys.stdout.write(json.dumps({"restored": env["RESTORE_FROM"], "peers": peers}) + "\n")
            return 0
        target, errors = backup(settings)
    except SettingError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except BackupError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"error: cannot use the backup volume: {type(exc).__name__}\n")
        return 1
    for e in errors:
        sys.stderr.write(f"error: {e}\n")
    removed = prune(settings.backup_dir, settings.keep) if not errors else []
    done = {"backup": target.name, "peers": len(settings.peers) - len(errors), "removed": removed}
    sys.stdout.write(json.dumps(done) + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], dict(os.environ)))
