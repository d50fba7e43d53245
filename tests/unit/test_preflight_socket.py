"""The API socket `docquery serve` binds up front must behave like uvicorn's own: no Nagle delay.

asyncio turns TCP_NODELAY on only for sockets whose protocol says TCP; a socket made with
protocol 0 (and every connection accepted from it) keeps Nagle's algorithm, which together with
the client's delayed ACK held each response's last segment back by about 40 ms.
"""

from __future__ import annotations

import asyncio
import socket

from docquery.runtime.preflight import bind_socket


def test_connections_accepted_on_the_bound_socket_have_tcp_nodelay() -> None:
    listener = bind_socket("127.0.0.1", 0, what="API", setting="--port")
    port = listener.getsockname()[1]
    seen: list[int] = []

    class Record(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Record, sock=listener)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
    assert seen and seen[0] != 0
