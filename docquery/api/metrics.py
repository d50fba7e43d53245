"""Prometheus metrics on a per-app registry, served on their own port.

No global default registry: two apps in one process (tests) never share or
collide on collectors. ``docquery serve`` exposes the registry on
``settings.metrics_port`` with a small separate server thread, so the metrics
port can be opened to monitoring only (NetworkPolicy) while the API port is not.
Labels come from fixed sets only, never from what a client sent: route
templates (``unmatched`` for anything else), known methods (``other`` for
anything else), status classes (``2xx``...), stages.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, start_http_server

from docquery.rag.pipeline import Trace

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "docquery_http_requests",
            "HTTP requests by route template, method and status class",
            ["route", "method", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "docquery_http_request_duration_seconds",
            "HTTP request latency (to the end of the body)",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.retrieval = Histogram(
            "docquery_retrieval_seconds",
            "Retrieval latency by stage (embed, search)",
            ["stage"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.llm_ttft = Histogram(
            "docquery_llm_time_to_first_token_seconds",
            "LLM time to first token",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.llm_total = Histogram(
            "docquery_llm_duration_seconds", "LLM call duration", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.tokens = Counter(
            "docquery_llm_completion_tokens",
            "Completion tokens (streamed chunks; words for non-streamed answers)",
            registry=r,
        )
        self.rate_limited = Counter("docquery_rate_limited", "Requests refused by the rate limiter", registry=r)
        self.refused = Counter(
            "docquery_refusals", "Answers refused because nothing relevant passed the threshold", registry=r
        )
        self.overloaded = Counter("docquery_overloaded", "Requests answered 503 (overload or dependency)", registry=r)
        self.refused_groups = Counter(
            "docquery_refused_group_values",
            "Group claim values that granted nothing: not a valid group name, or a claim of the wrong shape",
            registry=r,
        )
        self.auth_failures = Counter(
            "docquery_auth_failures", "Authentication/authorisation failures", ["status"], registry=r
        )

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """``route`` must be a route template or ``unmatched`` (the middleware guarantees it)."""
        method = method if method in KNOWN_METHODS else "other"
        status_class = _STATUS_CLASSES[status // 100 - 1] if 100 <= status < 600 else "5xx"
        self.requests.labels(route, method, status_class).inc()
        self.latency.labels(route).observe(seconds)
        if status == 429:
            self.rate_limited.inc()
        elif status == 503:
            self.overloaded.inc()
        elif status in (401, 403):
            self.auth_failures.labels(str(status)).inc()

    def observe_trace(self, trace: Trace) -> None:
        if trace.embed_s:
            self.retrieval.labels("embed").observe(trace.embed_s)
        if trace.search_s:
            self.retrieval.labels("search").observe(trace.search_s)
        if trace.llm_ttft_s is not None:
            self.llm_ttft.observe(trace.llm_ttft_s)
        if trace.llm_total_s is not None:
            self.llm_total.observe(trace.llm_total_s)
        if trace.deltas:
            self.tokens.inc(trace.deltas)
        if trace.refused:
            self.refused.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def start_metrics_server(metrics: Metrics, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``/metrics`` for this app's registry on its own port, in a daemon thread."""
    return start_http_server(port, addr=host, registry=metrics.registry)
