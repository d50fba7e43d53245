"""The final report: the contract's JSON object (plus extra keys), a summary table on a terminal, or plain lines.

Plain lines (stdout not a terminal: a pipe, a Job log) are never wrapped: one line
for the counts, one per failure, so a log search finds a failure whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ingest.report.terminal import safe


@dataclass
class Report:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)
    chunks_written: int = 0
    seconds: float = 0.0
    # Extra keys (the contract allows additions).
    acl_updated: int = 0
    chunks_embedded: int = 0
    chunks_flagged: int = 0
    chunks_quarantined: int = 0
    chunks_deleted: int = 0
    # HTML pages with no detectable main content, indexed whole (site furniture and all).
    html_whole_body: int = 0
    dry_run: bool = False
    shard: str = "0/1"
    plan: dict[str, list[str]] | None = None
    error: str | None = None
    # Files of a type DocQuery does not read: listed, but not failures (unless --strict).
    skipped: list[dict[str, str]] = field(default_factory=list)
    # Indexed documents not re-indexed this run whose ACL changed: what was done to their chunks.
    acl_previous: list[dict[str, str]] = field(default_factory=list)
    # What decided each discovered document's ACL: its ACL file relative to the ACL root, or the flag.
    acl_from: dict[str, str] = field(default_factory=dict)
    # Each flagged chunk: its document, heading path (or page), reasons and whether it was quarantined.
    flagged: list[dict[str, str]] = field(default_factory=list)
    # Each chunk indexed normally because its governing ACL file releases all its flags (the audit).
    released: list[dict[str, str]] = field(default_factory=list)
    # Each discovered document with releases: the flags its governing ACL file releases for it, and that file.
    releases: dict[str, dict[str, str]] = field(default_factory=dict)

    def fail(self, path: str, reason: str) -> None:
        self.failed.append({"path": path, "reason": reason})

    def flag(self, path: str, heading: str, reasons: tuple[str, ...], *, quarantined: bool) -> None:
        action = "quarantined" if quarantined else "flagged"
        self.flagged.append({"path": path, "heading": heading, "reason": ",".join(reasons), "action": action})

    def release(self, path: str, heading: str, reasons: tuple[str, ...], acl_file: str) -> None:
        self.released.append({"path": path, "heading": heading, "reason": ",".join(reasons), "acl_file": acl_file})

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append({"path": path, "reason": reason})

    @property
    def ok(self) -> bool:
        return not self.failed and self.error is None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "failed": sorted(self.failed, key=lambda f: f["path"]),
            "skipped": sorted(self.skipped, key=lambda f: f["path"]),
            "acl_previous": sorted(self.acl_previous, key=lambda f: f["path"]),
            "acl_from": dict(sorted(self.acl_from.items())),
            "flagged": sorted(self.flagged, key=lambda f: (f["path"], f["heading"])),
            "released": sorted(self.released, key=lambda f: (f["path"], f["heading"])),
            "releases": dict(sorted(self.releases.items())),
            "chunks_written": self.chunks_written,
            "seconds": round(self.seconds, 3),
            "acl_updated": self.acl_updated,
            "chunks_embedded": self.chunks_embedded,
            "chunks_flagged": self.chunks_flagged,
            "chunks_quarantined": self.chunks_quarantined,
            "chunks_released": len(self.released),
            "chunks_deleted": self.chunks_deleted,
            "html_whole_body": self.html_whole_body,
            "dry_run": self.dry_run,
            "shard": self.shard,
        }
        if self.plan is not None:
            out["plan"] = self.plan
        if self.error is not None:
            out["error"] = self.error
        return out

    def counts(self) -> list[tuple[str, int]]:
        return [
            ("added", self.added),
            ("updated", self.updated),
            ("acl_updated", self.acl_updated),
            ("unchanged", self.unchanged),
            ("deleted", self.deleted),
            ("failed", len(self.failed)),
            ("skipped", len(self.skipped)),
            ("chunks_written", self.chunks_written),
            ("chunks_flagged", self.chunks_flagged),
            ("chunks_quarantined", self.chunks_quarantined),
            ("chunks_released", len(self.released)),
            ("html_whole_body", self.html_whole_body),
        ]

    def plain_lines(self) -> list[str]:
        """The report as unwrapped lines: the counts, then each planned action, failure and error on its own."""
        head = "docquery ingest" + (" (dry run, nothing written)" if self.dry_run else "") + ": "
        lines = [head + " ".join(f"{k}={v}" for k, v in self.counts()) + f" seconds={self.seconds:.1f}"]
        for action, paths in (self.plan or {}).items():
            lines.extend(f"plan {action} {safe(path)}{self._decided(action, path)}" for path in paths)
        if self.plan is None:
            lines.extend(f"acl-from {safe(origin)}: {n} document(s)" for origin, n in self._origins())
        lines.extend(f"failed {safe(f['path'])}: {safe(f['reason'])}" for f in sorted(self.failed, key=_by_path))
        lines.extend(f"skipped {safe(f['path'])}: {safe(f['reason'])}" for f in sorted(self.skipped, key=_by_path))
        lines.extend(_flag_line(f) for f in sorted(self.flagged, key=_by_path))
        lines.extend(_release_line(f) for f in sorted(self.released, key=_by_path))
        lines.extend(f"acl {safe(f['path'])}: {safe(f['action'])}" for f in sorted(self.acl_previous, key=_by_path))
        if self.error:
            lines.append(f"error {safe(self.error)}")
        return lines

    def render(self, console: Console) -> None:
        if self.plan is not None:
            console.print("[bold]Plan (dry run, nothing written)[/bold]")
            for action, paths in self.plan.items():
                for path in paths:
                    console.print(
                        f"  {action:<12} {safe(path)}{self._decided(action, path)}", markup=False, highlight=False
                    )
        table = Table(title="docquery ingest" + (" (dry run)" if self.dry_run else ""), show_header=True)
        table.add_column("result")
        table.add_column("count", justify="right")
        labels = {"acl_updated": "acl updated (no re-embed)"}
        rows = [(labels.get(key, key.replace("_", " ")), value) for key, value in self.counts()]
        for name, value in rows:
            table.add_row(name, str(value))
        table.add_row("seconds", f"{self.seconds:.1f}")
        console.print(table)
        if self.plan is None:
            for origin, n in self._origins():
                console.print(f"acl from {escape(safe(origin))}: {n} document(s)", highlight=False)
        for f in sorted(self.failed, key=_by_path):
            console.print(f"[red]failed[/red] {escape(safe(f['path']))}: {escape(safe(f['reason']))}", highlight=False)
        for f in sorted(self.skipped, key=_by_path):
            console.print(f"skipped {escape(safe(f['path']))}: {escape(safe(f['reason']))}", highlight=False)
        for f in sorted(self.flagged, key=_by_path):
            console.print(escape(_flag_line(f)), highlight=False)
        for f in sorted(self.released, key=_by_path):
            console.print(escape(_release_line(f)), highlight=False)
        for f in sorted(self.acl_previous, key=_by_path):
            console.print(f"acl {escape(safe(f['path']))}: {escape(safe(f['action']))}", highlight=False)
        if self.error:
            console.print(f"[red]error[/red] {escape(safe(self.error))}", highlight=False)

    def _decided(self, action: str, path: str) -> str:
        """What decides a planned document's ACL, and the releases that would apply, after its path in the plan."""
        origin = self.acl_from.get(path) if action in {"add", "update", "acl_update", "unchanged"} else None
        if origin is None:
            return ""
        release = self.releases.get(path)
        freed = f"; releases {safe(release['reason'])}" if release is not None else ""
        return f" (acl from {safe(origin)}{freed})"

    def _origins(self) -> list[tuple[str, int]]:
        """Each ACL origin with how many documents it decided (the per-document list is in --json)."""
        counts: dict[str, int] = {}
        for origin in self.acl_from.values():
            counts[origin] = counts.get(origin, 0) + 1
        return sorted(counts.items())


def _flag_line(f: dict[str, str]) -> str:
    where = f" [{safe(f['heading'])}]" if f["heading"] else ""
    return f"{f['action']} {safe(f['path'])}{where}: {safe(f['reason'])}"


def _release_line(f: dict[str, str]) -> str:
    where = f" [{safe(f['heading'])}]" if f["heading"] else ""
    return f"released {safe(f['path'])}{where}: {safe(f['reason'])} (by {safe(f['acl_file'])})"


def _by_path(entry: dict[str, str]) -> str:
    return entry["path"]
