"""HTTP routes (minimal set: query, health). The full API extends this."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from docquery.domain import Answer, Principal
from docquery.wiring import Components

router = APIRouter()


def get_components(request: Request) -> Components:
    components: Components = request.app.state.components
    return components


ComponentsDep = Annotated[Components, Depends(get_components)]


class QueryRequest(BaseModel):
    question: str = Field(min_length=1, max_length=2000)
    top_k: int = Field(default=5, ge=1, le=50)
    stream: bool = False


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(c: ComponentsDep) -> dict[str, str]:
    return {"status": "ready" if c.index.ready() else "not ready"}


@router.post("/v1/query")
async def query(body: QueryRequest, c: ComponentsDep) -> Answer:
    principal = Principal(id="anonymous")  # replaced by the auth dependency
    return await c.pipeline.answer(body.question, principal, body.top_k, uuid.uuid4().hex)
