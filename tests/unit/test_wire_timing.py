"""The benchmark's packet-timestamp arithmetic (benchmarks/wire_timing.py) on hand-made segments.

The service's span starts when its request is complete: a client that writes the
head and the body in two segments (httpx does) must not be counted as the service's
time, and the stand-in's span is taken the same way.
"""

from __future__ import annotations

from benchmarks.wire_timing import Segment, exchanges, ttft_overheads

SVC, LLM = 8000, 9000


def seg(ts: float, port: int, inbound: bool, head: bytes, client: int = 50000) -> Segment:
    return Segment(ts=ts, port=port, inbound=inbound, client_port=client, head=head)


def test_exchange_starts_when_the_request_is_complete() -> None:
    segments = [
        seg(1.000, SVC, True, b"POST /v1/query HTTP/1.1\r\n"),
        seg(1.004, SVC, True, b'{"question": "q"}'),  # body 4 ms after the head: the client's time
        seg(1.010, SVC, False, b"HTTP/1.1 200 OK\r\nserver-timing: llm;dur=3.000\r\n\r\n"),
        seg(1.011, SVC, False, b"{}"),
        seg(2.000, SVC, True, b"POST /v1/query HTTP/1.1\r\n\r\n{}"),  # the next request, one segment
        seg(2.005, SVC, False, b"HTTP/1.1 200 OK\r\n\r\n{}"),
    ]
    first, second = exchanges(segments, SVC)
    assert (first.start, first.end, first.status) == (1.004, 1.011, 200)
    assert abs(first.span - 0.007) < 1e-9
    assert first.timing == {"llm": 0.003}
    assert abs(second.span - 0.005) < 1e-9


def test_ttft_overhead_counts_from_each_complete_request() -> None:
    segments = [
        seg(1.000, SVC, True, b"POST /v1/query HTTP/1.1\r\n"),
        seg(1.001, SVC, True, b'{"question": "q", "stream": true}'),
        seg(1.002, LLM, True, b"POST /v1/chat/completions HTTP/1.1\r\n", client=50001),
        seg(1.003, LLM, True, b'{"messages": []}', client=50001),
        seg(1.004, LLM, False, b"HTTP/1.1 200 OK\r\n\r\n", client=50001),
        seg(1.005, LLM, False, b'data: {"content": ""}', client=50001),  # role-only: not a token
        seg(1.503, LLM, False, b'data: {"content": "The "}', client=50001),
        seg(1.505, SVC, False, b"HTTP/1.1 200 OK\r\nserver-timing: embed;dur=0.500, search;dur=0.250\r\n\r\n"),
        seg(1.506, SVC, False, b"event: delta\ndata: {}"),
    ]
    # (1.506 - 1.001) - (1.503 - 1.003) - 0.0005 - 0.00025 = 0.00425
    (overhead,) = ttft_overheads(segments, SVC, LLM)
    assert abs(overhead - 0.00425) < 1e-9
