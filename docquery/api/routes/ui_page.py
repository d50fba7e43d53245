"""``GET /`` (the page) and ``GET /ui/static/{name}`` (its script, style and icon), from the package."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from docquery.api.errors import ApiError
from docquery.ui.assets import STATIC, Asset

router = APIRouter(include_in_schema=False)


def _assets(request: Request) -> dict[str, Asset]:
    assets: dict[str, Asset] = request.app.state.ui_assets
    return assets


@router.get("/")
async def page(request: Request) -> Response:
    asset = _assets(request)["index.html"]
    return Response(asset.body, media_type=asset.media_type)


@router.get("/ui/static/{name}")
async def static(name: str, request: Request) -> Response:
    # A fixed set of names, never a path: nothing else in the package (or beside it) can be read.
    if name not in STATIC:
        raise ApiError(404)
    asset = _assets(request)[name]
    return Response(asset.body, media_type=asset.media_type)
