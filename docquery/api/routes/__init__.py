"""HTTP routes, one module per feature."""

from __future__ import annotations

from fastapi import APIRouter

from docquery.api.routes import (
    documents,
    health,
    openai_compat,
    passages,
    quarantine,
    query,
    ui_page,
    ui_session,
    uploads,
)

# Included into the app one by one: FastAPI matches included routers level by level, so
# one wrapping router would add a level to every request's route matching.
ROUTERS: tuple[APIRouter, ...] = (
    query.router,
    openai_compat.router,
    documents.router,
    uploads.router,
    passages.router,
    quarantine.router,
    health.router,
)
# The web page and its sign-in, with ui.enabled.
UI_ROUTERS: tuple[APIRouter, ...] = (ui_page.router, ui_session.router)

__all__ = ["ROUTERS", "UI_ROUTERS"]
