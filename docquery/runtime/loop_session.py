"""An aiohttp session bound to the event loop that uses it, for the OpenAI-compatible clients.

A ``ClientSession`` belongs to one event loop. The session is opened on first use in the
running loop, and reopened when a later call runs in another loop (tests, the CLI).
``aclose`` releases it; the owner stays usable and opens a new one on its next call.
``trust_env`` is off: request bodies carry questions and document text, and a proxy
variable in the environment must not reroute them.
"""

from __future__ import annotations

import asyncio

import aiohttp


class LoopSession:
    def __init__(self, *, base_url: str, timeout: aiohttp.ClientTimeout, limit: int) -> None:
        self._base_url = base_url.rstrip("/") + "/"
        self._timeout = timeout
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(
                base_url=self._base_url,
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=self._limit),
                trust_env=False,
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        session, self._session, self._loop = self._session, None, None
        if session is not None:
            await session.close()
