"""Where a running ``docquery serve`` can be asked: the URL it records beside the embedded index it holds.

The embedded engine lets one process open a collection. ``serve`` records its address in
``DATA_DIR/serve/COLLECTION.json`` with its pid once it listens, so ``ask`` can send the question to it
instead of stopping. The record is trusted only while that pid holds the collection's lock: a record
left by a killed process, or written by another, names a pid that does not hold it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docquery.config.settings import Settings

log = logging.getLogger("docquery.cli")
_MAX_RECORD_BYTES = 4096


def record_path(settings: Settings, collection: str) -> Path:
    return settings.data_dir / "serve" / f"{collection}.json"


def local_url(host: str, port: int) -> str:
    """The URL a process on this machine reaches ``host:port`` at (a wildcard address is reached on loopback)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}"  # a host name
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    return f"http://[{address}]:{port}" if address.version == 6 else f"http://{address}:{port}"


def write_record(path: Path, url: str) -> bool:
    """Record this process's address; a data dir it cannot write only costs ``ask`` its shortcut."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps({"pid": os.getpid(), "url": url}), encoding="utf-8")
        partial.replace(path)  # a reader sees the old record or the new one, never half of one
    except OSError as exc:
        log.warning("cannot record the service's address in %s (%s): docquery ask will not find it", path, exc.strerror)
        return False
    return True


def remove_record(path: Path) -> None:
    """Remove the record if it is still this process's (a later serve may have replaced it)."""
    if read_record(path, os.getpid()) is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def read_record(path: Path, holder: int) -> str | None:
    """The URL recorded by process ``holder``, or None when there is no such record."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_RECORD_BYTES)
        record = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("pid") != holder:
        return None
    url = record.get("url")
    return url if isinstance(url, str) and url.startswith("http://") else None
