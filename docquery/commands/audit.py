"""``docquery audit verify [--allow-empty] FILE...``: check the hash chains of the service's audit log.

Exit 0 when every chain is intact, 1 when one is broken, 2 for usage or an unreadable file, 4 when the
files hold no audit record (0 with ``--allow-empty``): a verifier that passes an empty or wrong file
would let a script believe a log it never read. It reads no settings: it runs wherever the logs are.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from docquery.core.exits import ExitCode

PROG = "docquery audit verify"


def register(sub: Any) -> None:
    audit = sub.add_parser("audit", help="check the service's audit log", description="Check the audit log.")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    verify = audit_sub.add_parser(
        "verify",
        help="verify the hash chains of audit log files",
        description="Verify the hash chains of DocQuery audit logs.",
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="service log files (rotated files together)")
    verify.add_argument(
        "--allow-empty", action="store_true", help="exit 0 when the files hold no audit record (default: exit 4)"
    )
    verify.set_defaults(handler=run, needs_settings=False)


def run(args: argparse.Namespace, settings: object = None) -> int:
    from docquery.api.audit import AUDIT_LOGGER, is_audit_line, json_part, verify_audit_log

    lines: list[str] = []
    for p in args.files:
        try:
            # errors="replace": a binary file is reported line by line or skipped, never a traceback.
            with open(p, encoding="utf-8", errors="replace") as fh:  # noqa: PTH123
                lines.extend(json_part(line) for line in fh if is_audit_line(line))
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            # A shell glob that matches nothing (service.log*) arrives here as written.
            sys.stderr.write(f"{PROG}: cannot read {p}: {why}; give the path of a readable log file\n")
            return ExitCode.USAGE
    res = verify_audit_log(lines)
    for err in res.errors:
        sys.stderr.write(err + "\n")
    empty = res.records == 0 and not res.errors
    if empty and not args.allow_empty:
        res.ok = False
        sys.stderr.write(
            f"{PROG}: no audit records were found in the given files ({len(args.files)}): check that they are "
            f"the service's log (lines of the {AUDIT_LOGGER} logger), or pass --allow-empty if none are expected\n"
        )
    sys.stdout.write(json.dumps({"ok": res.ok, "records": res.records, "chains": res.chains}) + "\n")
    if res.ok:
        return ExitCode.OK
    return ExitCode.EMPTY if empty else ExitCode.FAILED
