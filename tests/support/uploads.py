"""Helpers for the upload tests: credentials that may upload, and a request with files and fields."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.support.api_harness import Harness

# token -> key entry (without its sha256): who may upload, grant what, in which tenant.
UPLOAD_KEYS: dict[str, dict[str, Any]] = {
    "tok-up-eng": {"id": "up-eng", "groups": ["eng"], "roles": ["ingest", "query"], "tenant": "acme"},
    "tok-up-eng2": {"id": "up-eng2", "groups": ["eng"], "roles": ["ingest", "query"], "tenant": "acme"},
    "tok-up-grant": {
        "id": "up-grant",
        "groups": ["eng"],
        "roles": ["ingest"],
        "tenant": "acme",
        "may_grant": ["board"],
    },
    "tok-admin": {"id": "admin", "groups": ["eng", "hr"], "roles": ["ingest", "query", "admin"], "tenant": "acme"},
    "tok-query": {"id": "q", "groups": ["eng"], "roles": ["query"]},
    "tok-up-other": {"id": "other", "groups": ["eng"], "roles": ["ingest", "query"], "tenant": "globex"},
    "tok-board": {"id": "board-reader", "groups": ["board"], "roles": ["query"]},
    "tok-hr": {"id": "hr-reader", "groups": ["hr"], "roles": ["query"]},
}


def write_upload_keys(secrets_dir: Path, extra: dict[str, dict[str, Any]] | None = None) -> None:
    """The harness's key file, holding the upload keys too (the file is read again when it changes)."""
    from tests.support.api_harness import KEYS

    entries = [
        {"id": kid, "sha256": hashlib.sha256(tok.encode()).hexdigest(), "groups": groups, "roles": roles}
        for tok, (kid, groups, roles) in KEYS.items()
    ]
    for tok, entry in (UPLOAD_KEYS | (extra or {})).items():
        entries.append({**entry, "sha256": hashlib.sha256(tok.encode()).hexdigest()})
    (secrets_dir / "api-keys.json").write_text(json.dumps(entries))


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def upload(h: Harness, token: str, files: list[tuple[str, bytes]], **fields: str) -> Any:  # the TestClient's response
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return h.client.post("/v1/documents", headers=auth(token), files=parts, data=fields)


def hand_over(h: Harness, token: str, files: list[tuple[str, bytes]], groups: str = "eng") -> Any:
    """What ``docquery ingest --server`` sends: the files, with where each is in the corpus (under /srv/share)."""
    corpus = json.dumps([{"path": f"/srv/share/{name}", "root": "/srv/share"} for name, _ in files])
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return h.client.post("/v1/documents", headers=auth(token), files=parts, data={"groups": groups, "corpus": corpus})


def drain(h: Harness, timeout_s: float = 120.0) -> None:
    assert h.app.state.uploads.worker.drain(timeout_s), "the upload worker did not finish"


def spooled(h: Harness) -> list[Path]:
    """Every file left in the spool."""
    root = h.app.state.uploads.spool.root
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
