"""The API socket `docquery serve` binds up front must behave like uvicorn's own: no Nagle delay.

asyncio turns TCP_NODELAY on only for sockets whose protocol says TCP; a socket made with
protocol 0 (and every connection accepted from it) keeps Nagle's algorithm, which together with
the client's delayed ACK held each response's last segment back by about 40 ms.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from docquery.core.errors import BusyError, ConfigError
from docquery.runtime.preflight import bind_socket


@pytest.mark.slow  # listens on a loopback port
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


# Hosts that cannot be listened on: a name that does not resolve, addresses no interface here has.
WRONG_HOSTS = ["no.such.host.invalid", "192.0.2.1", "203.0.113.7", "198.51.100.20"]


@pytest.mark.parametrize("host", WRONG_HOSTS)
def test_a_host_that_is_not_here_points_at_host_not_port(host: str) -> None:
    with pytest.raises(ConfigError) as info:
        bind_socket(host, 8090, what="API", setting="--port")
    message = str(info.value)
    assert message.startswith(f"cannot listen on {host}:8090 for the API: ")
    assert message.endswith("; check --host")


@pytest.mark.slow  # listens on a loopback port
def test_a_busy_port_still_names_the_port_setting() -> None:
    taken = bind_socket("127.0.0.1", 0, what="API", setting="--port")
    try:
        with pytest.raises(BusyError, match="choose another port with DOCQUERY_METRICS_PORT"):
            bind_socket("127.0.0.1", taken.getsockname()[1], what="metrics", setting="DOCQUERY_METRICS_PORT")
    finally:
        taken.close()
