"""``docquery ingest PATH --server URL --api-key-file F``: send the files to a running service.

With the embedded engine only the process holding the data dir may write it; when that is a running
``docquery serve``, the CLI hands the files over instead. Discovery and ACL resolution run here, where the
files are (the ACL files, ``--groups``, ``--public``, ``--include``); each file goes to ``POST /v1/documents``
with its resolved path and ingest root (``corpus``), so the service derives the same corpus id a direct run
does, and a later direct run finds the document unchanged. Files are sent in requests of one ACL each,
within the service's file-count and byte bounds. The key needs the ``ingest`` role, and the service grants
only groups the key may grant (its own, or its ``may_grant``); a refused request is one line, and the others
are still sent.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docquery.commands.ask_service import check_server_url, read_key
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.errors import ServiceUnavailable, UsageProblem
from ingest.discover.acl import AclResolver
from ingest.discover.folders import raise_open_files_limit
from ingest.discover.walk import discover
from ingest.model import FileRejected, SourceFile
from ingest.pipeline import IngestOptions
from ingest.reading import open_planned, read_all
from ingest.report.terminal import safe

MAX_FILES_PER_REQUEST = 20  # the service's default DOCQUERY_UPLOADS__MAX_FILES
MAX_BYTES_PER_REQUEST = 64 * 1024 * 1024
TIMEOUT_S = 300.0


@dataclass
class Handover:
    sent: int = 0
    jobs: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)

    def lines(self, url: str) -> list[str]:
        out = [f"failed {safe(path)}: {safe(reason)}" for path, reason in self.failed]
        watch = f"; watch each with GET {url}/v1/ingest/jobs/JOB_ID" if self.jobs else ""
        out.append(f"sent {self.sent} files to {url} in {len(self.jobs)} requests{watch}")
        out += [f"job {job}" for job in self.jobs]
        return out


def _batches(files: list[tuple[SourceFile, bytes]]) -> Iterator[list[tuple[SourceFile, bytes]]]:
    """Files of one ACL, each file name once per request, within the request bounds."""
    by_acl: dict[tuple[str, ...], list[tuple[SourceFile, bytes]]] = {}
    for item in files:
        by_acl.setdefault(item[0].acl_groups, []).append(item)
    for group in by_acl.values():
        batch: list[tuple[SourceFile, bytes]] = []
        size = 0
        for src, data in group:
            clash = any(s.path.name == src.path.name for s, _ in batch)
            if batch and (clash or len(batch) >= MAX_FILES_PER_REQUEST or size + len(data) > MAX_BYTES_PER_REQUEST):
                yield batch
                batch, size = [], 0
            batch.append((src, data))
            size += len(data)
        if batch:
            yield batch


def _body(batch: list[tuple[SourceFile, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    acl = batch[0][0].acl_groups
    fields = {"public": "true"} if acl == (PUBLIC_GROUP,) else {"groups": ",".join(acl)}
    fields["corpus"] = json.dumps([{"path": str(s.path), "root": str(s.root)} for s, _ in batch])
    out = bytearray()
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value.encode()
        out += b"\r\n"
    for src, data in batch:
        quoted = json.dumps(src.path.name, ensure_ascii=False)  # a quoted string, as the service reads it
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename={quoted}\r\n'.encode()
        out += b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def _post(url: str, key: str, body: bytes, content_type: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(  # noqa: S310  # the scheme is checked: http or https only
        f"{url}/v1/documents",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type, "Accept": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the key goes to the service alone
    try:
        with opener.open(request, timeout=TIMEOUT_S) as response:
            return response.status, json.loads(response.read(1 << 20))
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read(64 * 1024))
        except (OSError, ValueError):
            answer = {}
        return exc.code, answer if isinstance(answer, dict) else {}
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        why = getattr(reason, "strerror", None) or type(reason).__name__
        raise ServiceUnavailable(f"the docquery service at {url} did not answer ({why})") from None


def _message(answer: dict[str, object]) -> str:
    error = answer.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return "".join(c if c.isprintable() else " " for c in message)[:300] if isinstance(message, str) else ""


def _read(src: SourceFile, max_bytes: int) -> bytes:
    with open_planned(src.path, dir_fd=src.dir_fd) as opened:
        if opened.size > max_bytes:
            raise FileRejected(f"file too large ({opened.size} bytes > limit {max_bytes})")
        return read_all(opened, max_bytes)


def hand_over(opts: IngestOptions, server: str, key_file: Path, max_file_bytes: int) -> Handover:
    """Discover here, send there; raises UsageProblem or ServiceUnavailable for what stops the whole run."""
    if opts.dry_run or opts.delete_missing or opts.collection:
        raise UsageProblem(
            "--server sends files to the service's own collection: --dry-run, --delete-missing and --collection "
            "apply to a direct run only; leave them out"
        )
    url, key = check_server_url(server), read_key(key_file)
    resolver = AclResolver(opts.groups, opts.acl_origin, root=opts.acl_root)
    raise_open_files_limit()
    discovery = discover(opts.paths, filters=opts.filters, shard=opts.shard, acl=resolver)
    result = Handover(failed=list(discovery.rejected))
    try:
        files: list[tuple[SourceFile, bytes]] = []
        for src in discovery.files:
            try:
                files.append((src, _read(src, max_file_bytes)))
            except FileRejected as exc:
                result.failed.append((str(src.path), exc.reason))
            except OSError as exc:
                result.failed.append((str(src.path), f"cannot read file ({exc.strerror or type(exc).__name__})"))
        for batch in _batches(files):
            status, answer = _post(url, key, *_body(batch))
            if status == 202:
                result.sent += len(batch)
                result.jobs.append(str(answer.get("job_id", "")))
                continue
            if status == 401:
                raise UsageProblem(f"the docquery service at {url} refused the API key: check --api-key-file")
            reason = f"refused by the service ({status}: {_message(answer)})"
            result.failed += [(str(src.path), reason) for src, _ in batch]
    finally:
        discovery.close()
    return result
