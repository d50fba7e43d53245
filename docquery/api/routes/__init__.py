"""HTTP routes, one module per feature."""

from __future__ import annotations

from fastapi import APIRouter

from docquery.api.routes import documents, health, openai_compat, query

# Included into the app one by one: FastAPI matches included routers level by level, so
# one wrapping router would add a level to every request's route matching.
ROUTERS: tuple[APIRouter, ...] = (query.router, openai_compat.router, documents.router, health.router)

__all__ = ["ROUTERS"]
