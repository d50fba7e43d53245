"""``docquery ingest``: registered into the docquery CLI through an entry point."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from docquery.collection import PUBLIC_GROUP
from docquery.settings import Settings
from ingest.pipeline import IngestOptions, run_ingest

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(sub: Any) -> None:
    p = sub.add_parser("ingest", help="chunk, embed and index documents")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    acl = p.add_mutually_exclusive_group()
    acl.add_argument("--groups", default=None, help="ACL groups for every document, comma-separated")
    acl.add_argument("--public", action="store_true", help="mark documents readable by every authenticated caller")
    p.add_argument("--collection", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    groups = tuple(sorted({g.strip() for g in (args.groups or "").split(",") if g.strip()}))
    if args.public:
        groups = (PUBLIC_GROUP,)
    if not groups:
        sys.stderr.write("docquery ingest: --groups or --public is required (no ACL, no ingest)\n")
        return EXIT_USAGE
    if PUBLIC_GROUP in (args.groups or ""):
        sys.stderr.write(f"docquery ingest: {PUBLIC_GROUP!r} is reserved; use --public\n")
        return EXIT_USAGE
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        sys.stderr.write(f"docquery ingest: path not found: {', '.join(missing)}\n")
        return EXIT_USAGE
    opts = IngestOptions(paths=tuple(args.paths), groups=groups, collection=args.collection)
    report = run_ingest(settings, opts)
    if args.json:
        sys.stdout.write(json.dumps(report.as_json()) + "\n")
    else:
        sys.stdout.write(report.summary() + "\n")
    return EXIT_FAILED if report.failed else EXIT_OK
