"""The page's files, shipped inside the package (no CDN, no build step): read once, served from memory."""

from __future__ import annotations

import html
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str


_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
# Served under /ui/static/<name>; the page itself (index.html) is served at /.
STATIC = ("app.js", "app.css", "icon.svg")


def load_assets() -> dict[str, Asset]:
    root = resources.files("docquery.ui") / "static"
    return {name: Asset(root.joinpath(name).read_bytes(), media) for name, media in _TYPES.items()}


def error_page(title: str, message: str) -> str:
    """A page for an error met during a browser navigation (sign-in callback): both strings as text."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)} - DocQuery</title><link rel="stylesheet" href="/ui/static/app.css">'
        '<link rel="icon" href="/ui/static/icon.svg"></head>'
        f'<body><main class="error-page"><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>'
        '<p><a href="/">Back to sign-in</a></p></main></body></html>'
    )
