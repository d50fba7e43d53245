"""HTTP routes, one module per feature."""

from __future__ import annotations

from fastapi import APIRouter

from docquery.api.routes import documents, health, openai_compat, query

router = APIRouter()
router.include_router(health.router)
router.include_router(query.router)
router.include_router(openai_compat.router)
router.include_router(documents.router)

__all__ = ["router"]
