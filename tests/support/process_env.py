"""The environment of a DocQuery process a test starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


def start_serve(tmp: Path, env: dict[str, str], timeout_s: float = 240) -> tuple[subprocess.Popen[str], Path]:
    """``docquery serve --port 0`` with ``env``, once it has recorded its address: the process and the record.
    Its log goes to ``tmp/serve.log``: a pipe nobody reads fills with its audit lines, and it then blocks."""
    with (tmp / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "docquery.cli", "serve", "--port", "0"],
            env=env, stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
    record = Path(env["DOCQUERY_DATA_DIR"]) / "serve" / "docquery.json"
    deadline = time.monotonic() + timeout_s
    while not record.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert record.exists(), "serve did not record its address: " + (tmp / "serve.log").read_text()[-2000:]
    return proc, record
