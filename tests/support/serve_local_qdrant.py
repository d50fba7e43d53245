"""The service on a Qdrant server's API without a server: qdrant-client's on-disk local mode (``path=``).

Run as ``python -m tests.support.serve_local_qdrant QDRANT_DIR ADDRESS_FILE``: the app ``docquery serve``
runs (settings from the environment, the bundled model, the upload worker), over the server adapter with a
local-mode client on QDRANT_DIR, listening on a free loopback port that it writes to ADDRESS_FILE as
``{"url": ...}`` once it is ready. tests/integration/test_upload_kill.py kills it with SIGKILL.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import uvicorn
from qdrant_client import QdrantClient

from docquery.api.app import create_app
from docquery.config.settings import Settings
from docquery.index import QdrantIndex, open_server
from docquery.wiring import build_components, build_embedder


def open_local(path: Path, settings: Settings) -> tuple[QdrantIndex, QdrantClient]:
    """The collection on a local-mode client at ``path`` (the caller closes both)."""
    embedder = build_embedder(settings, lazy=True)
    client = QdrantClient(path=str(path))
    index = open_server(
        url="local-path",
        name=settings.qdrant.collection,
        model_id=embedder.model_id,
        dimension=embedder.dimension,
        client=client,
    )
    return index, client


def main() -> None:
    qdrant_dir, address = Path(sys.argv[1]), Path(sys.argv[2])
    settings = Settings()
    embedder = build_embedder(settings)
    index, client = open_local(qdrant_dir, settings)
    components = build_components(settings, embedder=embedder, index=index)
    app = create_app(settings, components=components)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    class Announced(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            address.write_text(json.dumps({"url": f"http://127.0.0.1:{port}"}))  # noqa: ASYNC240 - once, at start

    try:
        Announced(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        components.close()
        client.close()


if __name__ == "__main__":
    main()
