"""The environment of a DocQuery process a test starts."""

from __future__ import annotations

import os
from pathlib import Path


def docquery_env(tmp: Path, *, secrets: str = "secrets", **settings: str) -> dict[str, str]:
    """None of the developer's DOCQUERY_* settings; data and secrets dirs under ``tmp``; a free metrics port (a
    serve beside the suite holds the default); malloc left as it is; the bundled model read offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCQUERY_")}
    env.update(
        DOCQUERY_DATA_DIR=str(tmp / "data"),
        DOCQUERY_SECRETS_DIR=str(tmp / secrets),
        DOCQUERY_METRICS_PORT="0",
        DOCQUERY_EMBEDDER__TUNE_MALLOC="false",
        HF_HUB_OFFLINE="1",
    )
    env.update(settings)  # a test's own settings win
    return env
