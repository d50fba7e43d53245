"""Value types passed between the ingest stages (discover -> load -> chunk -> embed -> write)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from docquery import chunking
from docquery.core.domain import Chunk, DocumentRecord
from docquery.core.errors import DocQueryError, UsageProblem

# Keys of a document record's ``extra``: written by prepare, read back by the next run's plan.
EXTRA_PATH = "path"
EXTRA_PIPELINE = "pipeline"
EXTRA_ACL_ORIGIN = "acl_origin"
EXTRA_FLAGS = "flags"

# The loaders build sections; the chunker that ingest and the evaluation share defines them.
Section = chunking.Section


class FileRejected(DocQueryError):
    """One file cannot be ingested. ``reason`` is safe to show: it never quotes file content."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UsageError(UsageProblem):
    """A usage or configuration problem found before anything is written (exit 2)."""


@dataclass(frozen=True)
class SourceFile:
    """A discovered file. ``rel`` is relative to the ingest root it was found under (POSIX form)."""

    root: Path  # resolved ingest root (a directory)
    path: Path  # resolved path of the file
    rel: str
    acl_groups: tuple[str, ...]
    acl_origin: str  # the metadata file that gave the ACL, or "--groups"/"--public"
    kind: str = ""  # the loader's suffix (".txt" for sniffed text); "" until the plan decides
    # The descriptor of the file's folder, held since discovery (ingest.discover.folders): every read
    # opens the file's name relative to it. None only for a SourceFile built outside discovery.
    dir_fd: int | None = None
    # The flags its governing ACL file releases for it (ingest.discover.release), sorted.
    released: tuple[str, ...] = ()

    def fingerprint(self, pipeline: str) -> str:
        """The pipeline fingerprint stored with its record: a change of its releases re-indexes it."""
        return f"{pipeline};released={','.join(self.released)}" if self.released else pipeline

    @property
    def cited_as(self) -> str:
        """The ``source`` citations show: the root folder's name, then the path under it, so two roots
        that each hold ``notes.txt`` are told apart (``handbook/notes.txt``, ``wiki/notes.txt``)."""
        return f"{self.root.name}/{self.rel}" if self.root.name else self.rel


@dataclass(frozen=True)
class LoadedDoc:
    title: str
    sections: tuple[Section, ...]
    whole_body: bool = False  # an HTML page with no detectable main content, read whole


@dataclass(frozen=True)
class PlannedDoc:
    """A file whose content must be (re)indexed."""

    source: SourceFile
    doc_id: str
    content_sha256: str
    previous: DocumentRecord | None
    identity: tuple[int, int, int] | None = None  # device, inode, ctime of the file the plan hashed (ingest.reading)


@dataclass
class PreparedDoc:
    """A planned document after load + scan + chunk, ready to embed."""

    planned: PlannedDoc
    record: DocumentRecord  # the final record (status complete); written last
    chunks: list[Chunk]
    quarantined: list[bool]
    embed_texts: list[str] = field(default_factory=list)
    # Per chunk: indexed normally because its governing ACL file releases every one of its flags.
    released: list[bool] = field(default_factory=list)
    whole_body: bool = False  # LoadedDoc.whole_body: an HTML page read whole, no main content found
