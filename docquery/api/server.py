"""The uvicorn options of ``docquery serve``, in one place so tests serve the app the same way.

- **h11, with limits.** uvicorn's default ("auto") switches to httptools
  whenever that package is installed, and uvicorn bounds a request head only
  for h11. The protocol class is uvicorn's h11 one with the connection limits
  of ``settings.api`` (``docquery.api.protocol``: head, body and idle time,
  head size however it arrives, number of connections).
- **No WebSockets.** The API has none, so an ``Upgrade`` is not honoured.
- **No access log.** uvicorn's access lines carry query strings; the audit
  log records what is needed, without text.
- **No proxy headers.** uvicorn would take ``X-Forwarded-For`` from loopback
  (its ``forwarded_allow_ips`` default), so any local client, ``kubectl
  port-forward`` included, could name its address; the app reads the header
  itself, from ``api.trusted_proxies`` only (``docquery.api.client_address``).
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import uvicorn

from docquery.api.protocol import ConnectionLimits, guarded_protocol
from docquery.config.settings import ApiSettings

log = logging.getLogger("docquery.serve")


class AnnouncedServer(uvicorn.Server):
    """Logs where it listens once it accepts connections: uvicorn announces no address for sockets it is
    handed (it expects the process that bound them to), and with ``--port 0`` the log is the only place
    that says which port the system picked."""

    def __init__(self, config: uvicorn.Config, *, metrics_port: int = 0) -> None:
        super().__init__(config)
        self._metrics_port = metrics_port

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)  # exits on a failed lifespan: nothing to announce then
        for sock in sockets or ():
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            metrics = f"; metrics on port {self._metrics_port}" if self._metrics_port else ""
            log.info("listening on http://%s:%d%s", shown, port, metrics)


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
        # The standard loop, whatever else is installed ("auto" would take uvloop if present: measured, no gain).
        "loop": "asyncio",
        "access_log": False,
        "proxy_headers": False,
        "log_level": log_level.lower(),
    }
