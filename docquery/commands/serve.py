"""``docquery serve``: the HTTP API, started only once everything it needs is known to be available."""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from docquery.core.errors import ConfigError
from docquery.core.exits import ExitCode

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from docquery.api.metrics import Metrics
    from docquery.config.settings import Settings

log = logging.getLogger("docquery.cli")


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the HTTP API", description="Run the HTTP API.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=port_number, default=8080, help="API port (default 8080); metrics: DOCQUERY_METRICS_PORT"
    )
    serve.set_defaults(handler=run, prefer_json_logs=True)


def port_number(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:  # 0: a free port the system picks
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1 to 65535 (or 0, any free one)")
    return port


def run(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from docquery.api.app import authenticator, create_app
    from docquery.api.metrics import Metrics
    from docquery.api.server import AnnouncedServer, server_options
    from docquery.commands.ask import empty_index
    from docquery.commands.service_record import local_url, record_path, remove_record, write_record
    from docquery.runtime.kernel_caches import bound_kernel_caches
    from docquery.runtime.preflight import bind_socket, check_data_dir, check_index_free, edge_collection
    from docquery.secrets import build_secret_source
    from docquery.wiring import build_components

    bound_kernel_caches()  # before the model's first pass, when torch reads the bound
    if settings.metrics_port and settings.metrics_port == args.port:
        raise ConfigError(f"DOCQUERY_METRICS_PORT ({args.port}) is the same as --port: choose another for metrics")
    # Everything another process can hold, and the data dir itself, is checked before the model loads.
    check_data_dir(settings)
    check_index_free(settings)
    sock = bind_socket(args.host, args.port, what="API", setting="--port")
    components = None
    metrics_server = None
    record = None
    try:
        # Listening on the metrics port now holds it, so a busy one fails before anything is loaded or
        # written; until the app starts it serves this registry's zeros.
        metrics = Metrics()
        if settings.metrics_port:
            metrics_server = _start_metrics(metrics, args.host, settings.metrics_port)
        secrets = build_secret_source(settings)
        authenticator(settings, secrets)  # the prod profile without auth: exit 2 before the model loads
        # Built here, not in the app's lifespan: an index that cannot open or a model that cannot load is
        # one line and exit 2 (3 if busy), where a lifespan failure is uvicorn's traceback and its exit 3.
        edge = edge_collection(settings)
        created = edge is not None and not edge.exists
        # Never creates a collection on a Qdrant server (the query side's key may only read): a missing
        # one is exit 2 saying to run the ingest first.
        components = build_components(settings, secrets=secrets, create_index=False)
        if created or components.index.count_chunks() == 0:
            # It serves anyway (a collection the ingest has created and not filled yet), but a typo in the
            # data dir must not pass for an index with nothing relevant in it.
            why = "did not exist and was created empty" if created else "holds no documents"
            log.warning(
                "%s; every answer will be 'not in the documents' until then",
                empty_index(settings, settings.qdrant.collection, why),
            )
        app = create_app(settings, components=components, metrics=metrics)
        # log_config=None: uvicorn's loggers keep the handler main() configured (docquery/runtime/logs.py), so
        # its lines have the same format as ours instead of uvicorn's own.
        options = server_options(settings.log_level, settings.api) | {"log_config": None}
        if edge is not None:
            # Holding the embedded index, this process is the only one that can answer from it: say where,
            # so that `docquery ask` sends its question here instead of stopping (commands/service_record.py).
            record = record_path(settings, settings.qdrant.collection)
            host, port = sock.getsockname()[:2]
            write_record(record, local_url(host, port))
        with _sigterm_is_a_normal_stop():
            server = AnnouncedServer(uvicorn.Config(app, **options), metrics_port=settings.metrics_port)
            server.run(sockets=[sock])
    finally:
        if record is not None:
            remove_record(record)
        sock.close()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        if components is not None:
            components.close()
    return ExitCode.OK


def _start_metrics(metrics: Metrics, host: str, port: int) -> WSGIServer:
    from docquery.api.metrics import start_metrics_server
    from docquery.runtime.preflight import port_busy

    try:
        # Its own port, so a NetworkPolicy can open metrics to monitoring only.
        server, _ = start_metrics_server(metrics, host, port)
        return server
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise ConfigError(
                f"cannot listen on {host}:{port} for metrics: {exc.strerror}; check DOCQUERY_METRICS_PORT"
            ) from None
        raise port_busy(host, port, what="metrics", setting="DOCQUERY_METRICS_PORT") from None


@contextlib.contextmanager
def _sigterm_is_a_normal_stop() -> Iterator[None]:
    """uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler it found.
    With the default one that kills the process (status 143), though SIGTERM is how ``kill`` and
    Kubernetes stop a service; under this no-op one ``serve`` returns 0. Ctrl-C still ends in 130."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only (uvicorn installs no handlers elsewhere either)
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
