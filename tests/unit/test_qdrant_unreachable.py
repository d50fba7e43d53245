"""A Qdrant server that does not answer is reported with the URL (no credentials, no query) and its setting.

Before: "vector index operation 'open' failed: no response from the server", naming neither.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docquery.config.settings import Settings
from docquery.core.errors import VectorIndexUnreachable
from docquery.core.urls import public_url
from docquery.wiring import INDEXES
from tests.support.fakes import HashEmbedder

# (DOCQUERY_QDRANT__URL as set, what the message may show of it); port 1 refuses at once.
UNREACHABLE = [
    ("http://127.0.0.1:1", "http://127.0.0.1:1"),
    ("http://127.0.0.1:1/", "http://127.0.0.1:1/"),
    ("http://admin:hunter2-pw@127.0.0.1:1", "http://127.0.0.1:1"),
    ("http://127.0.0.1:1/qdrant?api_key=hunter2-q#frag", "http://127.0.0.1:1/qdrant"),
    ("https://tok-hunter2@[::1]:1", "https://[::1]:1"),
]


@pytest.mark.parametrize(("url", "shown"), UNREACHABLE)
def test_open_names_the_url_and_the_setting(tmp_path: Path, url: str, shown: str) -> None:
    settings = Settings(data_dir=tmp_path, secrets_dir=tmp_path, qdrant={"url": url, "timeout_s": 1})
    with pytest.raises(VectorIndexUnreachable) as info:
        INDEXES["server"](settings, HashEmbedder(), "c", lambda: None, True)
    message = str(info.value)
    assert f"no response from the Qdrant server at {shown} (DOCQUERY_QDRANT__URL): check that the server" in message
    assert "hunter2" not in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        *UNREACHABLE,
        ("http://qdrant:6333", "http://qdrant:6333"),
        ("  https://q.example/x/?a=b ", "https://q.example/x/"),
        ("not-a-url", None),
        ("user:secret@host", None),  # parses as scheme "user" and a path: never echoed
        ("http://host:99999", None),
        ("", None),
    ],
)
def test_public_url_drops_what_may_carry_a_key(url: str, shown: str | None) -> None:
    assert public_url(url) == shown
