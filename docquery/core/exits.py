"""Every exit code a ``docquery`` command returns (docs/contract.md lists them)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # Some work failed: ingest's files that could not be indexed, a broken audit chain, a bug.
    FAILED = 1
    USAGE = 2  # usage or configuration error; nothing was done
    BUSY = 3  # another process holds the embedded index or a port
    # The input held nothing to work on: ``ask``'s empty index, ``audit verify``'s files without a record.
    EMPTY = 4
    UNAVAILABLE = 75  # sysexits' EX_TEMPFAIL: a server it needs did not answer; the same command may succeed later
    INTERRUPTED = 130  # 128 + SIGINT, the shell's convention
