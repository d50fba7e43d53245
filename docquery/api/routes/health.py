"""``/healthz`` (liveness, no dependencies) and ``/readyz`` (what this pod itself can serve).

Readiness gates traffic to the pod, so it reflects only what the service can do on
its own: search needs the index and the embedder. The upload worker's state is
reported, not required (a batch sent while it is ``starting`` waits a few seconds
for its parse process). The LLM is reported, not required: while it is down (a
vLLM rollout) search keeps working and generation answers 503 ``llm_unavailable``,
so taking every query pod out of the Service for it would turn a partial outage
into a total one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from docquery.api.errors import envelope, request_id_of

log = logging.getLogger("docquery.api")
router = APIRouter()
_PROBE_TIMEOUT_S = 2.0
# Counting the catalog scans it; kubelet probes every few seconds, so the figure is reused briefly.
_COUNT_TTL_S = 30.0

LlmState = Literal["ready", "unavailable", "not_configured"]


@dataclass(frozen=True)
class _IndexCounts:
    documents: int
    chunks: int
    at: float


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "search cannot be served (index or embedder)"}})
async def readyz(request: Request) -> JSONResponse:
    components = getattr(request.app.state, "components", None)
    checks: dict[str, bool] = {"components": components is not None}
    body: dict[str, Any] = {}
    if components is not None:
        checks["index"] = await _check(components.index.ready)
        checks["embedder"] = await _check(getattr(components.embedder, "ready", None))
        body["index"] = await _index_state(request, components.index) if checks["index"] else {"state": "unavailable"}
        llm = await _llm_state(components.generator)
        if llm != "not_configured":
            checks["llm"] = llm == "ready"
        body["llm"] = {"state": llm, "generation": _generation(llm)}
        body["uploads"] = {"state": _uploads_state(request)}
    required = {k: v for k, v in checks.items() if k != "llm"}
    if all(required.values()):
        status = "ready" if checks.get("llm", True) else "degraded"
        return JSONResponse({"status": status, "checks": checks, **body})
    failed = ", ".join(k for k, ok in required.items() if not ok)
    err: dict[str, Any] = envelope(503, f"not ready: {failed}", request_id_of(request), type_="not_ready")
    err.update(checks=checks, **body)
    return JSONResponse(err, status_code=503, headers={"Retry-After": "2"})


def _uploads_state(request: Request) -> str:
    """``off`` (no worker here), ``starting`` (a batch would wait for its parse process to start) or ``ready``;
    reported, never required: queries do not need it."""
    uploads = getattr(request.app.state, "uploads", None)
    if uploads is None:
        return "off"
    return "ready" if uploads.worker.processor.ready() else "starting"


def _generation(llm: LlmState) -> str:
    if llm == "not_configured":
        return "extractive"  # no LLM configured: answers are extracts, marked mode "extractive"
    return "available" if llm == "ready" else "unavailable"  # generation requests get 503 llm_unavailable


async def _llm_state(generator: Any) -> LlmState:
    probe = getattr(generator, "ready", None)
    if probe is None:  # only a remote LLM has a readiness probe (GET /models)
        return "not_configured"
    return "ready" if await _check(probe) else "unavailable"


async def _index_state(request: Request, index: Any) -> dict[str, Any]:
    cached: _IndexCounts | None = getattr(request.app.state, "readyz_index_counts", None)
    now = time.monotonic()
    if cached is None or now - cached.at > _COUNT_TTL_S:
        try:
            documents, chunks = await asyncio.wait_for(asyncio.to_thread(_count, index), _PROBE_TIMEOUT_S)
        except Exception as exc:
            log.warning("readiness index count failed: %s", type(exc).__name__)
            return {"state": "ready", "documents": None, "chunks": None}
        cached = _IndexCounts(documents, chunks, now)
        request.app.state.readyz_index_counts = cached
    # An empty index is a valid state (before the first ingest): ready, but said so.
    state = "empty" if cached.documents == 0 and cached.chunks == 0 else "ready"
    return {"state": state, "documents": cached.documents, "chunks": cached.chunks}


def _count(index: Any) -> tuple[int, int]:
    return len(index.list_documents()), int(index.count_chunks())


async def _check(probe: Any) -> bool:
    if probe is None:
        return True  # built in the lifespan: loaded
    try:
        if inspect.iscoroutinefunction(probe):
            return bool(await asyncio.wait_for(probe(), _PROBE_TIMEOUT_S))
        return bool(await asyncio.wait_for(asyncio.to_thread(probe), _PROBE_TIMEOUT_S))
    except Exception as exc:
        log.warning("readiness probe failed: %s", type(exc).__name__)
        return False
