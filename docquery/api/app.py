"""App factory. Components are built in the lifespan (or passed in by tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from docquery.api import routes
from docquery.settings import Settings
from docquery.wiring import Components, build_components

ComponentsFactory = Callable[[Settings], Components]


def create_app(
    settings: Settings, *, components: Components | None = None, factory: ComponentsFactory | None = None
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        built = components or (factory or build_components)(settings)
        app.state.components = built
        try:
            yield
        finally:
            if components is None:
                built.close()

    app = FastAPI(title="DocQuery", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.include_router(routes.router)
    return app
