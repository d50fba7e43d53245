"""The uvicorn options of ``docquery serve``, in one place so tests serve the app the same way.

- **h11, with limits.** uvicorn's default ("auto") switches to httptools
  whenever that package is installed, and uvicorn bounds a request head only
  for h11. The protocol class is uvicorn's h11 one with the connection limits
  of ``settings.api`` (``docquery.api.protocol``: head, body and idle time,
  head size however it arrives, number of connections).
- **No WebSockets.** The API has none, so an ``Upgrade`` is not honoured.
- **No access log.** uvicorn's access lines carry query strings; the audit
  log records what is needed, without text.
"""

from __future__ import annotations

from typing import Any

from docquery.api.protocol import ConnectionLimits, guarded_protocol
from docquery.config.settings import ApiSettings


def server_options(log_level: str, api: ApiSettings | None = None) -> dict[str, Any]:
    limits = api or ApiSettings()
    return {
        "http": guarded_protocol(
            ConnectionLimits(
                head_timeout_s=limits.head_timeout_s,
                body_timeout_s=limits.body_timeout_s,
                keepalive_timeout_s=limits.keepalive_timeout_s,
                send_timeout_s=limits.send_timeout_s,
                max_connections=limits.max_connections,
                max_head_bytes=limits.max_head_bytes,
            )
        ),
        "timeout_keep_alive": limits.keepalive_timeout_s,
        "h11_max_incomplete_event_size": limits.max_head_bytes,
        "ws": "none",
        "access_log": False,
        "log_level": log_level.lower(),
    }
