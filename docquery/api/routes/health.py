"""``/healthz`` (liveness, no dependencies) and ``/readyz`` (index, embedder, LLM)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from docquery.api.errors import envelope, request_id_of

log = logging.getLogger("docquery.api")
router = APIRouter()
_LLM_PROBE_TIMEOUT_S = 2.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is not ready"}})
async def readyz(request: Request) -> JSONResponse:
    components = getattr(request.app.state, "components", None)
    checks: dict[str, bool] = {"components": components is not None}
    if components is not None:
        checks["index"] = await _check(components.index.ready)
        checks["embedder"] = await _check(getattr(components.embedder, "ready", None))
        probe = getattr(components.generator, "ready", None)
        if probe is not None:  # only a remote LLM has a readiness probe (GET /models)
            checks["llm"] = await _check(probe)
    if all(checks.values()):
        return JSONResponse({"status": "ready", "checks": checks})
    failed = ", ".join(k for k, ok in checks.items() if not ok)
    body: dict[str, Any] = envelope(503, f"not ready: {failed}", request_id_of(request), type_="not_ready")
    body["checks"] = checks
    return JSONResponse(body, status_code=503, headers={"Retry-After": "2"})


async def _check(probe: Any) -> bool:
    if probe is None:
        return True  # built in the lifespan: loaded
    try:
        if inspect.iscoroutinefunction(probe):
            return bool(await asyncio.wait_for(probe(), _LLM_PROBE_TIMEOUT_S))
        return bool(await asyncio.to_thread(probe))
    except Exception as exc:
        log.warning("readiness probe failed: %s", type(exc).__name__)
        return False
