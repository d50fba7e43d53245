"""Server-side request timing taken from the wire, for ``api_overhead.py``.

A raw packet socket on the loopback interface records the kernel's timestamp of
every TCP segment to and from the service's port. For each request on a
keep-alive connection, the service's own time is the span from the request's
last segment going in (the request is complete: a client that writes head and
body separately, as httpx does, is not the service's time) to the last response
segment going out: the HTTP parser, waiting for the event loop, the app and the
response writes are all inside it; the load generator's own work (building the
request, reading and parsing the response, its event loop) is not. Subtracting the ``Server-Timing``
stage durations (embed, search, LLM) from that span gives the service's
overhead as the service alone causes it.

For streaming, the stand-in's port is captured too: the service's time to
first token is the span from the request complete to the first ``delta``
event going out, less the stand-in's own span from the chat request complete
to its first content token going out, less embed and search.

Needs CAP_NET_RAW (root here). Without it, ``LoopbackCapture.start`` returns
False and the benchmark reports its client-side figures only.
"""

from __future__ import annotations

import itertools
import re
import socket
import struct
import threading
from dataclasses import dataclass, field

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
PACKET_OUTGOING = 4  # on lo every segment is seen twice (out, then in); keep one copy
_ETH_IPV4 = b"\x08\x00"
_TIMING = re.compile(r"(\w+);dur=([0-9.]+)")


@dataclass
class Exchange:
    start: float  # kernel time of the request's last segment: the request is complete
    end: float = 0.0  # kernel time of the last response segment
    status: int = 0
    timing: dict[str, float] = field(default_factory=dict)  # Server-Timing, in seconds

    @property
    def span(self) -> float:
        return self.end - self.start


@dataclass
class Segment:
    ts: float
    port: int  # the server port of the connection
    inbound: bool  # client -> server
    client_port: int
    head: bytes  # the first 16 KiB of the payload


class LoopbackCapture:
    """Captures the payload segments of some server ports on ``lo`` in a background thread."""

    def __init__(self, *ports: int) -> None:
        self.ports = set(ports)
        self.segments: list[Segment] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def start(self) -> bool:
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except (PermissionError, OSError):
            return False
        sock.bind(("lo", 0))
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.settimeout(0.1)
        self._sock = sock
        self._thread = threading.Thread(target=self._run, name="wire-capture", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> list[Segment]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._sock is not None:
            self._sock.close()
        return sorted(self.segments, key=lambda s: s.ts)

    def _run(self) -> None:
        assert self._sock is not None
        anc = socket.CMSG_SPACE(16)
        while not self._stop.is_set():
            try:
                data, ancdata, _flags, addr = self._sock.recvmsg(65536, anc)
            except TimeoutError:
                continue
            if addr[2] != PACKET_OUTGOING:
                continue
            seg = self._parse(data, ancdata)
            if seg is not None:
                self.segments.append(seg)

    def _parse(self, data: bytes, ancdata: list[tuple[int, int, bytes]]) -> Segment | None:
        if data[12:14] != _ETH_IPV4 or data[23] != socket.IPPROTO_TCP:
            return None
        ip = data[14:]
        ihl = (ip[0] & 0x0F) * 4
        (ip_len,) = struct.unpack("!H", ip[2:4])
        tcp = ip[ihl:ip_len]
        sport, dport = struct.unpack("!HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if not payload or not {sport, dport} & self.ports:
            return None
        ts = next(
            (s + ns / 1e9 for lvl, typ, raw in ancdata if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS
             for s, ns in [struct.unpack("qq", raw[:16])]),
            0.0,
        )  # fmt: skip
        inbound = dport in self.ports
        server, client = (dport, sport) if inbound else (sport, dport)
        return Segment(ts, server, inbound, client, payload[:16384])


def exchanges(segments: list[Segment], port: int) -> list[Exchange]:
    """Pairs requests and responses per connection (closed-loop clients: one request in flight)."""
    open_: dict[int, Exchange] = {}
    done: list[Exchange] = []
    for seg in segments:
        if seg.port != port:
            continue
        cur = open_.get(seg.client_port)
        if seg.inbound:
            if cur is None or cur.end:  # a new request after the previous response
                if cur is not None:
                    done.append(cur)
                open_[seg.client_port] = Exchange(start=seg.ts)
            else:  # more of the same request (a body written after its head)
                cur.start = seg.ts
            continue
        if cur is None:
            continue
        cur.end = seg.ts
        if seg.head.startswith(b"HTTP/1.1 ") and not cur.status:
            cur.status = int(seg.head.split(b" ", 2)[1])
            cur.timing = server_timing(seg.head)
    done.extend(cur for cur in open_.values() if cur.end)
    return done


def ttft_overheads(segments: list[Segment], service: int, standin: int) -> list[float]:
    """Service-side time-to-first-token overhead per streamed request (one request at a time).

    (first ``delta`` out - request complete) - (stand-in's first content out - chat request
    complete at the stand-in) - (embed + search from ``Server-Timing``).
    """
    out: list[float] = []
    for _, rest in _requests(segments, service):
        chat = next((i for i, s in enumerate(rest) if s.port == standin and s.inbound
                     and s.head.startswith(b"POST /v1/chat/completions")), None)  # fmt: skip
        if chat is None:
            continue
        chat_in = _complete(rest, chat)
        first = next((s.ts for s in rest[chat:] if s.port == standin and not s.inbound
                      and b'"content": "' in s.head and b'"content": ""' not in s.head), None)  # fmt: skip
        delta = next((s for s in rest if s.port == service and not s.inbound and b"event: delta" in s.head), None)
        head = next((s.head for s in rest if s.port == service and s.head.startswith(b"HTTP/1.1 ")), b"")
        if first is None or delta is None:
            continue
        timing = server_timing(head)
        out.append(
            (delta.ts - _complete(rest, 0)) - (first - chat_in) - timing.get("embed", 0.0) - timing.get("search", 0.0)
        )
    return out


def _complete(segments: list[Segment], i: int) -> float:
    """Kernel time of the last segment of the request that starts at ``segments[i]``.

    The request's segments are the inbound ones on its connection before that
    server's first segment out.
    """
    first = segments[i]
    last = first.ts
    for s in segments[i + 1 :]:
        if s.port != first.port or s.client_port != first.client_port:
            continue
        if not s.inbound:
            break
        last = s.ts
    return last


def _requests(segments: list[Segment], port: int) -> list[tuple[float, list[Segment]]]:
    """Each request's start on ``port`` and every segment up to the next request's start."""
    starts = [i for i, s in enumerate(segments) if s.port == port and s.inbound and s.head.startswith(b"POST ")]
    bounds = [*starts, len(segments)]
    return [(segments[a].ts, segments[a:b]) for a, b in itertools.pairwise(bounds)]


def parse_timing(header: str) -> dict[str, float]:
    """Stage durations (s) from a ``Server-Timing`` header value."""
    return {k: float(v) / 1000.0 for k, v in _TIMING.findall(header or "")}


def server_timing(head: bytes) -> dict[str, float]:
    """Stage durations (s) from a captured response head."""
    return parse_timing(_header(head, b"server-timing").decode("latin-1"))


def _header(head: bytes, name: bytes) -> bytes:
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return b""
