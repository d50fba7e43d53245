"""The uvicorn options of ``docquery serve``, in one place so tests serve the app the same way.

- **h11, named explicitly.** uvicorn's default ("auto") switches to httptools
  whenever that package is installed, and uvicorn bounds a request head only
  for h11 (``h11_max_incomplete_event_size``, 16 KiB; larger heads get 400).
  With httptools, endless headers would grow memory before the app sees the
  request.
- **No WebSockets.** The API has none, so an ``Upgrade`` is not honoured.
- **No access log.** uvicorn's access lines carry query strings; the audit
  log records what is needed, without text.
"""

from __future__ import annotations

from typing import Any


def server_options(log_level: str) -> dict[str, Any]:
    return {"http": "h11", "ws": "none", "access_log": False, "log_level": log_level.lower()}
