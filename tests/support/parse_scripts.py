"""Misbehaving ``prepare`` functions for the parse-process tests. They run inside the parse
process, so they live in a module it can import, and they pickle (a class at module level)."""

from __future__ import annotations

import os
import signal
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from docquery.chunking import ChunkSpec, RegexTokenizer, SentenceChunker
from ingest.discover.acl import AclResolver
from ingest.discover.walk import Discovery, Filters, Shard, discover
from ingest.model import FileRejected, PlannedDoc, PreparedDoc
from ingest.plan.compare import build_plan
from ingest.prepare.document import PrepareConfig, prepare
from ingest.prepare.loaders import Limits

CANARY = "CANARY-7f3a parse error text"


def real_chunker() -> SentenceChunker:
    return SentenceChunker(RegexTokenizer(), ChunkSpec(200, 30))


def real_config() -> PrepareConfig:
    return PrepareConfig(
        limits=Limits(max_file_bytes=1_000_000, max_expanded_bytes=10_000_000),
        quarantine_flagged=True,
        pipeline_fingerprint="test",
        ingested_at="2026-11-30T00:00:00+00:00",
    )


@dataclass(frozen=True)
class Scripted:
    """Prepares a file for real, unless its name (before the suffix) says otherwise:
    ``segv`` dies of SIGSEGV, ``exit7`` exits with code 7, ``hang`` sleeps for an hour,
    ``raise`` raises with file-like text in the message, ``reject`` is a FileRejected,
    ``whoami`` is rejected with the id of the process that parsed it, and ``warn`` issues a
    two-line warning quoting file-like text, then is prepared for real."""

    cfg: PrepareConfig

    def __call__(self, planned: PlannedDoc) -> PreparedDoc:
        stem = planned.source.path.stem
        if stem == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif stem == "exit7":
            os._exit(7)
        elif stem == "hang":
            time.sleep(3600)
        elif stem == "raise":
            raise ValueError(CANARY)
        elif stem == "reject":
            raise FileRejected("scripted rejection")
        elif stem == "whoami":
            raise FileRejected(f"parsed by pid {os.getpid()}")
        elif stem == "warn":
            warnings.warn(f"{CANARY}\nsecond line", UserWarning, stacklevel=1)
        return prepare(planned, real_chunker(), self.cfg)


# Each discovery holds its folders' descriptors, which the planned documents are read through: kept for
# the session, as a run keeps them until it ends (a discovery that is collected closes them).
_HELD: list[Discovery] = []


def planned_docs(root: Path) -> list[PlannedDoc]:
    """Every file under ``root`` as a planned add, in path order (one ACL for all)."""
    found = discover([root], filters=Filters(), shard=Shard(), acl=AclResolver(("staff",), "--groups"))
    _HELD.append(found)
    plan = build_plan(
        found,
        [],
        pipeline_fingerprint="test",
        max_file_bytes=10**9,
        delete_missing=False,
        filters=Filters(),
        shard=Shard(),
    )
    return sorted(plan.add, key=lambda p: p.source.rel)
