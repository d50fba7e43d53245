"""The client's address, resolved in one place, and the key its failed authentications are counted under.

``docquery serve`` runs uvicorn without its proxy-headers middleware (which by default believes
``X-Forwarded-For`` from loopback, so a client could name any address per request). Here a proxy
header is read only when the TCP peer is in ``api.trusted_proxies``; then the client is the rightmost
``X-Forwarded-For`` hop that is not itself a trusted proxy (a client can prepend hops, never append
past the proxy it reaches). ``Forwarded`` (RFC 7239) is not read.

Bucket keys are normalised so one client has one bucket however its address is spelt: IPv4-mapped
IPv6 is IPv4, a zone id is dropped, and IPv6 is grouped by /64 (the block one host is usually given).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import Scope

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_MAX_HOPS = 32  # a longer header is not walked further: past it, the last trusted hop is the client


def parse_ip(text: str) -> IPAddress | None:
    """An address as peers and proxies write it (``::1``, ``[::1]:443``, ``1.2.3.4:80``, ``fe80::1%eth0``)."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]  # IPv4 with a port
    text = text.partition("%")[0]  # a zone id names an interface, not a host
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def bucket_key(ip: IPAddress) -> str:
    """The failed-authentication bucket: the IPv4 address, or the IPv6 /64."""
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))


def parse_networks(cidrs: Sequence[str]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


class ClientAddress:
    def __init__(self, trusted_proxies: Sequence[str]) -> None:
        self._trusted = parse_networks(trusted_proxies)

    def _is_trusted(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self._trusted)

    def resolve(self, scope: Scope) -> IPAddress | None:
        """The client's address, or None when the peer is not an IP (a test client, a Unix socket)."""
        peer_pair = scope.get("client")
        peer = parse_ip(str(peer_pair[0])) if peer_pair else None
        if peer is None or not self._trusted or not self._is_trusted(peer):
            return peer
        hops: list[str] = []
        for name, value in scope.get("headers", ()):
            if name == b"x-forwarded-for":
                hops.extend(value.decode("latin-1").split(","))
        client = peer
        for hop in reversed(hops[-_MAX_HOPS:]):
            ip = parse_ip(hop)
            if ip is None:
                break  # garbage before a trusted hop: the last trusted hop is all that is known
            client = ip
            if not self._is_trusted(ip):
                break
        return client

    def bucket(self, scope: Scope) -> str:
        ip = self.resolve(scope)
        if ip is not None:
            return bucket_key(ip)
        peer_pair = scope.get("client")
        return str(peer_pair[0]) if peer_pair else ""
