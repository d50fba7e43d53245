"""Per-request context kept in the ASGI scope: ids, timings, outcome. Never content."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from docquery.rag.pipeline import Trace

# A client-supplied X-Request-ID is kept only if it is plainly an id, so it can
# never inject text into a log line or an error body.
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def new_request_id(client_value: str | None = None) -> str:
    if client_value and _CLIENT_ID.match(client_value):
        return client_value
    return uuid.uuid4().hex


@dataclass
class RequestContext:
    request_id: str
    method: str
    started: float = field(default_factory=time.perf_counter)
    route: str = "unmatched"
    principal_id: str | None = None
    outcome: str = ""
    status: int = 0
    trace: Trace | None = None
    doc_ids: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    # What an upload adds to its audit record: the job, the ACL given (ids and group names, never content).
    audit_detail: dict[str, Any] = field(default_factory=dict)
    # Run when the request ends, however it ends (a stream whose body never started included).
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def use_trace(self) -> Trace:
        if self.trace is None:
            self.trace = Trace()
        return self.trace

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def returned(self) -> tuple[list[str], list[str]]:
        """Doc and chunk ids this request returned (from the trace, or set by the route).

        An error response returned none, whatever retrieval had found: the audit says what
        the caller received. A stream that failed after it started did send its citations.
        """
        if not 200 <= self.status < 400:
            return [], []
        if self.doc_ids or self.chunk_ids or self.trace is None:
            return self.doc_ids, self.chunk_ids
        return self.trace.doc_ids, self.trace.chunk_ids
