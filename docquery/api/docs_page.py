"""Swagger UI at ``/docs`` in the dev profile, served from the swagger-ui-bundle package.

The product runs air-gapped, so the page loads nothing from elsewhere: its script, style sheet
and icon come from the package's files through this app, the schema from ``/openapi.json``, and
the schema validator Swagger UI would call on validator.swagger.io is turned off. Only the three
files the page needs are served (not the package folder, whose demo page points at a public
schema). The prod profile has no schema and no page.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

ASSETS = "/docs/assets"
_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def _bundle_dir() -> Path:
    import swagger_ui_bundle  # type: ignore[import-untyped]

    return Path(str(swagger_ui_bundle.swagger_ui_path))


def install_docs_page(app: FastAPI, openapi_url: str) -> None:
    folder = _bundle_dir()

    async def page() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title="DocQuery API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    def asset(name: str, media_type: str) -> None:
        path = folder / name

        async def serve() -> FileResponse:
            return FileResponse(path, media_type=media_type)

        app.add_api_route(f"{ASSETS}/{name}", serve, methods=["GET"], include_in_schema=False)

    app.add_api_route("/docs", page, methods=["GET"], include_in_schema=False)
    for name, media_type in _FILES.items():
        asset(name, media_type)
