"""``docquery ingest``: registered into the docquery CLI through the ``docquery.commands`` entry point.

Exit codes (docs/contract.md): 0 every file indexed, unchanged or skipped (a type DocQuery does not
read; ``--strict`` makes skips failures); 1 some files failed
(the others are indexed, the failures listed) or the run stopped on an index
error; 2 usage or configuration error, with nothing written; 3 another process
holds the embedded index (nothing loaded or written); 130 interrupted (Ctrl-C):
what was indexed stays indexed, and a re-run continues.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from docquery import validation
from docquery.config.settings import Settings
from docquery.core.collection import PUBLIC_GROUP
from docquery.core.errors import BusyError, ServiceUnavailable, UsageProblem
from docquery.core.exits import ExitCode
from docquery.runtime.kernel_caches import bound_kernel_caches
from docquery.runtime.malloc import tune_for_bulk_embedding
from ingest.discover.acl import parse_groups
from ingest.discover.walk import Filters, parse_shard
from ingest.pipeline import IngestOptions, run_ingest
from ingest.report.progress import make_progress
from ingest.report.terminal import safe

STOPPING = "docquery ingest: stopping once the batch being embedded is written (Ctrl-C again to stop now)"
INTERRUPTED = (
    "docquery ingest: interrupted; documents indexed before the interrupt are kept and nothing indexed "
    "earlier is lost; run the same command again to continue (unchanged documents are skipped)"
)
log = logging.getLogger("ingest")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ingest",
        help="chunk, embed and index documents",
        description="Index files (txt, md, html, pdf, docx). PATH may be a file or a folder (walked recursively). "
        "ACLs come from .docquery-acl.yaml files in the folders, else from --groups/--public.",
    )
    p.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="files or folders to index (folders recursively)"
    )
    acl = p.add_mutually_exclusive_group()
    acl.add_argument("--groups", default=None, help="groups for documents no .docquery-acl.yaml covers (G1,G2)")
    acl.add_argument("--public", action="store_true", help="documents no ACL file covers are public")
    p.add_argument(
        "--acl-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="no .docquery-acl.yaml above DIR applies (default DOCQUERY_INGEST__ACL_ROOT, else each PATH)",
    )
    p.add_argument("--collection", default=None, help="collection to write (default DOCQUERY_QDRANT__COLLECTION)")
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="only files matching GLOB (repeatable; see docs/ingestion.md)",
    )
    p.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="skip files matching GLOB (repeatable)"
    )
    p.add_argument("--delete-missing", action="store_true", help="remove documents under PATH whose files are gone")
    p.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    p.add_argument("--shard", default=None, metavar="I/N", help="index only shard I of N (by relative path hash)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--strict", action="store_true", help="count skipped files (unsupported types) as failures")
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="send the files to the docquery serve at URL instead of writing the index (needs --api-key-file)",
    )
    p.add_argument(
        "--api-key-file", type=Path, default=None, metavar="FILE", help="with --server: a file holding an API key"
    )
    p.set_defaults(handler=_run)


def options_from_args(args: argparse.Namespace) -> IngestOptions:
    """Raises UsageError for bad flags."""
    if args.public:
        groups: tuple[str, ...] | None = (PUBLIC_GROUP,)
        origin = "--public"
    elif args.groups is not None:
        groups, origin = parse_groups(args.groups), "--groups"
    else:
        groups, origin = None, ""
    validation.collection(args.collection)  # "../x" would create files outside the data dir
    return IngestOptions(
        paths=tuple(args.paths),
        groups=groups,
        acl_origin=origin,
        collection=args.collection,
        filters=Filters(include=tuple(args.include), exclude=tuple(args.exclude)),
        delete_missing=args.delete_missing,
        dry_run=args.dry_run,
        shard=parse_shard(args.shard),
        strict=args.strict,
        acl_root=args.acl_root,
    )


def run(
    args: argparse.Namespace, settings: Settings, interrupt: threading.Event | None = None, **components: Any
) -> int:
    """The command body; ``components`` (embedder=, index=) let tests pass their own."""
    if args.server is not None or args.api_key_file is not None:
        return _hand_over(args, settings)
    try:
        opts = options_from_args(args)
        # Progress goes to stderr, so --json keeps stdout to the one report object.
        progress = make_progress(enabled=True, interval_s=settings.ingest.progress_interval_s)
        report = run_ingest(settings, opts, progress=progress, interrupt=interrupt, **components)
    except UsageProblem as exc:  # ingest's UsageError and the shared checks (docquery.validation)
        sys.stderr.write(f"docquery ingest: {safe(str(exc))}\n")  # messages name untrusted paths
        return ExitCode.USAGE
    except BusyError as exc:
        # Names the collection and a path; and, when a docquery serve holds it, how to send the files there.
        sys.stderr.write(f"docquery ingest: {safe(busy_message(exc, settings, args))}\n")
        return ExitCode.BUSY
    except KeyboardInterrupt:
        # Records are written per document after its chunks (ingest/write/stream.py), so a partly
        # indexed document stays "pending" and the re-run redoes it.
        sys.stderr.write(INTERRUPTED + "\n")
        return ExitCode.INTERRUPTED
    if args.json:
        sys.stdout.write(json.dumps(report.as_json()) + "\n")
    elif sys.stdout.isatty():
        report.render(Console())
    else:
        sys.stdout.write("".join(line + "\n" for line in report.plain_lines()))  # a pipe, a Job log: no wrapping
    return ExitCode.OK if report.ok else ExitCode.FAILED


def busy_message(exc: BusyError, settings: Settings, args: argparse.Namespace) -> str:
    """Why the index is busy; when a ``docquery serve`` holds it, in one line how to hand it the files."""
    from docquery.commands.service_record import read_record, record_path
    from docquery.runtime.preflight import edge_collection, lock_holder

    collection = args.collection or settings.qdrant.collection
    edge = edge_collection(settings, collection)
    holder = lock_holder(edge.path / "wal") if edge is not None else None
    url = read_record(record_path(settings, collection), holder) if holder else None
    if url is None:
        return str(exc)
    paths = " ".join(shlex.quote(str(p)) for p in args.paths)
    return (
        f"a docquery serve at {url} holds the index (collection {collection!r}); send the files to it: "
        f"docquery ingest {paths} --server {url} --api-key-file FILE (FILE: an API key with the ingest role)"
    )


def _hand_over(args: argparse.Namespace, settings: Settings) -> int:
    from ingest.handover import hand_over

    try:
        if args.server is None or args.api_key_file is None:
            raise UsageProblem("--server and --api-key-file go together: the service's URL, and a file holding its key")
        result = hand_over(options_from_args(args), args.server, args.api_key_file, settings.ingest.max_file_bytes)
    except UsageProblem as exc:
        sys.stderr.write(f"docquery ingest: {safe(str(exc))}\n")
        return ExitCode.USAGE
    except ServiceUnavailable as exc:
        sys.stderr.write(f"docquery ingest: {safe(str(exc))}\n")
        return ExitCode.UNAVAILABLE
    sys.stdout.write("".join(line + "\n" for line in result.lines(args.server.rstrip("/"))))
    return ExitCode.FAILED if result.failed else ExitCode.OK


def _run(args: argparse.Namespace, settings: Settings) -> int:
    bound_kernel_caches()  # before the model's first pass, when torch reads the bound
    if settings.embedder.tune_malloc:
        tune_for_bulk_embedding()  # before any component starts a thread (docquery/runtime/malloc.py)
    with _ctrl_c_says_what_happens() as interrupt:
        return run(args, settings, interrupt)


@contextlib.contextmanager
def _ctrl_c_says_what_happens() -> Iterator[threading.Event]:
    """The first Ctrl-C says that the embed call in flight finishes first; a second one stops at once.

    The first one only sets the event, which the indexing stage checks: raising from the handler would
    interrupt the main thread wherever it is, for example holding a log handler's lock that the embed and
    write threads then wait for forever.
    """
    interrupt = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupt
        return

    def first(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.write(2, (STOPPING + "\n").encode())  # no buffered stream: the handler may run inside a write
        interrupt.set()

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield interrupt
    finally:
        signal.signal(signal.SIGINT, previous)
