"""The ``docquery`` console script: serve, ask, eval, and plugin commands.

``docquery ingest`` is contributed by the ``ingest`` package through the
``docquery.commands`` entry-point group, so this module never imports ``ingest``.

Exit codes (docs/contract.md): 0 done; 1 some work failed (ingest); 2 usage or
configuration error; 3 busy (another process holds the embedded index or a port);
4 ``ask`` found no documents in the index; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import os
import signal
import sys
import threading
import traceback
import uuid
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt
from rich.console import Console
from rich.markdown import Markdown

from docquery.commands.config import register as register_config
from docquery.config.settings import Settings, SettingsError, load_settings
from docquery.core.collection import (
    COLLECTION_NAME_RULE,
    GROUP_PATTERN,
    PUBLIC_GROUP,
    is_valid_collection_name,
    is_valid_group_name,
)
from docquery.core.domain import Answer, Principal
from docquery.core.errors import (
    CollectionMissingError,
    ConfigError,
    DocQueryError,
    EmbedderUnreachable,
    VectorIndexError,
    VectorIndexUnreachable,
)
from docquery.evaluation.cli import register as register_eval
from docquery.runtime.logs import configure_logging, resolve_format
from docquery.runtime.preflight import (
    EXIT_BUSY,
    BusyError,
    bind_socket,
    check_data_dir,
    check_index_free,
    edge_collection,
    is_lock_failure,
    port_busy,
)
from docquery.secrets import build_secret_source, refuse_env_secrets
from docquery.wiring import Components, build_components

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from docquery.api.metrics import Metrics

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_EMPTY = 4
EXIT_UNAVAILABLE = 75  # sysexits' EX_TEMPFAIL: a dependency did not answer; the same command may succeed later
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention
log = logging.getLogger("docquery.cli")


class EmptyIndexError(DocQueryError):
    """``ask`` against a collection that does not exist or holds no chunks."""


class UsageProblem(DocQueryError):
    """A flag's value is out of range: exit 2."""


def parse_groups(value: str | None) -> frozenset[str]:
    """``--as-groups``: names as ``ingest --groups`` takes them (GROUP_PATTERN), so a typo such as 'a b'
    is refused instead of quietly seeing nothing; none given is allowed (the caller sees nothing)."""
    names = [g.strip() for g in (value or "").split(",") if g.strip()]
    for i, name in enumerate(names, start=1):
        # The value is not echoed: it is untrusted text on the terminal, as in ingest's message.
        if name == PUBLIC_GROUP:
            raise UsageProblem(f"--as-groups: {PUBLIC_GROUP!r} is a reserved label; every caller sees public documents")
        if not is_valid_group_name(name):
            raise UsageProblem(f"--as-groups: group {i} is not a valid group name (pattern {GROUP_PATTERN})")
    return frozenset(names)


def _question(value: str, settings: Settings) -> str:
    if not value.strip():
        raise UsageProblem('the question is empty: give it as the first argument, e.g. docquery ask "What is ...?"')
    limit = settings.api.max_question_chars  # the API's bound: `ask` answers what the service would
    if len(value) > limit:
        raise UsageProblem(f"the question is longer than {limit} characters (DOCQUERY_API__MAX_QUESTION_CHARS)")
    return value


def docquery_version() -> str:
    try:
        return version("docquery")
    except PackageNotFoundError:
        return "unknown (not installed)"


async def _answer_once(components: Components, question: str, principal: Principal, top_k: int) -> Answer:
    try:
        return await components.pipeline.answer(question, principal, top_k, uuid.uuid4().hex)
    finally:
        await components.release_loop_resources()


def _top_k(requested: int | None, settings: Settings) -> int:
    # The same bounds as the API (docquery/api/limits.py): 1..DOCQUERY_RETRIEVAL__MAX_TOP_K.
    high = settings.retrieval.max_top_k
    if requested is None:
        return min(settings.retrieval.top_k, high)
    if not 1 <= requested <= high:
        raise UsageProblem(f"--top-k must be between 1 and {high} (DOCQUERY_RETRIEVAL__MAX_TOP_K), got {requested}")
    return requested


def _empty(settings: Settings, collection: str, why: str) -> EmptyIndexError:
    where = f"DOCQUERY_DATA_DIR={settings.data_dir}" if not settings.qdrant.url else "the Qdrant server"
    return EmptyIndexError(
        f"the index is empty: collection {collection!r} in {where} {why}; "
        "ingest documents first (`docquery ingest PATH`), or point DOCQUERY_DATA_DIR at the index you ingested into"
    )


def _cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    question = _question(args.question, settings)
    groups = parse_groups(args.as_groups)
    top_k = _top_k(args.top_k, settings)
    if args.collection is not None and not is_valid_collection_name(args.collection):
        raise UsageProblem(f"--collection must be {COLLECTION_NAME_RULE}, e.g. docs-2024")
    collection = args.collection or settings.qdrant.collection
    check_data_dir(settings, collection)
    edge = edge_collection(settings, collection)
    if edge is not None and not edge.exists:
        raise _empty(settings, collection, "does not exist")  # and is not created: a typo must not look like data
    check_index_free(settings, collection)
    try:
        components = build_components(settings, collection=collection, lazy_model=True, create_index=False)
    except CollectionMissingError:
        raise _empty(settings, collection, "does not exist") from None
    try:
        if components.index.count_chunks() == 0:
            raise _empty(settings, collection, "holds no documents")
        principal = Principal(id="cli", groups=groups)
        answer = asyncio.run(_answer_once(components, question, principal, top_k))
    finally:
        components.close()
    if args.json:
        sys.stdout.write(answer.model_dump_json() + "\n")
        return EXIT_OK
    console = Console()
    console.soft_wrap = not console.is_terminal  # a pipe or a log gets whole lines, never cut at 80 columns
    # The answer is sanitised CommonMark: a terminal shows it rendered; piped output keeps the markdown.
    # Citation title, source and page are plain text, printed as they are (never Markdown here).
    console.print(f"[bold]Answer[/bold] ({answer.mode}, {answer.model})", highlight=False)
    if console.is_terminal:
        console.print(Markdown(answer.answer, hyperlinks=False))
    else:
        console.print(answer.answer, markup=False, highlight=False)
    if answer.citations:
        console.print("[bold]Citations[/bold]")
        for c in answer.citations:
            where = f" ({c.page})" if c.page else ""
            console.print(
                f"  [{c.id}] {c.title} — {c.source}{where}  score={c.score:.4f}",
                markup=False,
                highlight=False,
            )
    else:
        console.print("[dim]No citations.[/dim]")
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from docquery.api.app import authenticator, create_app
    from docquery.api.metrics import Metrics
    from docquery.api.server import AnnouncedServer, server_options

    if settings.metrics_port and settings.metrics_port == args.port:
        raise ConfigError(f"DOCQUERY_METRICS_PORT ({args.port}) is the same as --port: choose another for metrics")
    # Everything another process can hold, and the data dir itself, is checked before the model loads.
    check_data_dir(settings)
    check_index_free(settings)
    sock = bind_socket(args.host, args.port, what="API", setting="--port")
    components = None
    metrics_server = None
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
                _empty(settings, settings.qdrant.collection, why),
            )
        app = create_app(settings, components=components, metrics=metrics)
        # log_config=None: uvicorn's loggers keep the handler main() configured (docquery/runtime/logs.py), so
        # its lines have the same format as ours instead of uvicorn's own.
        options = server_options(settings.log_level, settings.api) | {"log_config": None}
        with _sigterm_is_a_normal_stop():
            server = AnnouncedServer(uvicorn.Config(app, **options), metrics_port=settings.metrics_port)
            server.run(sockets=[sock])
    finally:
        sock.close()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        if components is not None:
            components.close()
    return EXIT_OK


def _start_metrics(metrics: Metrics, host: str, port: int) -> WSGIServer:
    from docquery.api.metrics import start_metrics_server

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


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:  # 0: a free port the system picks
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1 to 65535 (or 0, any free one)")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="docquery", description="Secure question answering over your documents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {docquery_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ask = sub.add_parser("ask", help="answer a question locally (no server)", description="Answer a question locally.")
    ask.add_argument("question", help="the question (never logged)")
    ask.add_argument("--as-groups", default="", help="the caller's groups, comma-separated; none sees nothing")
    ask.add_argument(
        "--top-k", type=int, default=None, metavar="K",
        help="passages to retrieve, 1..DOCQUERY_RETRIEVAL__MAX_TOP_K (default DOCQUERY_RETRIEVAL__TOP_K)",
    )  # fmt: skip
    ask.add_argument("--collection", default=None, help="collection to ask (default DOCQUERY_QDRANT__COLLECTION)")
    ask.add_argument("--json", action="store_true", help="print the same object POST /v1/query returns")
    ask.set_defaults(handler=_cmd_ask)

    serve = sub.add_parser("serve", help="run the HTTP API", description="Run the HTTP API.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, default=8080, help="API port (default 8080); metrics: DOCQUERY_METRICS_PORT"
    )
    serve.set_defaults(handler=_cmd_serve, prefer_json_logs=True)

    register_eval(sub)
    register_config(sub)

    for ep in entry_points(group="docquery.commands"):
        ep.load()(sub)
    return parser


def _early_logging() -> None:
    """Until settings are loaded (they may warn), log as the environment asks, best effort."""
    try:
        configure_logging(
            os.environ.get("DOCQUERY_LOG_LEVEL", "INFO"),
            resolve_format(os.environ.get("DOCQUERY_LOG_FORMAT", "auto"), stream=sys.stderr, prefer_json=False),
        )
    except DocQueryError:
        configure_logging("INFO", "text")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _early_logging()
    try:
        settings = load_settings()
        # Before any command looks at the index: prod refuses a secret left in the environment.
        refuse_env_secrets(settings.profile)
        fmt = resolve_format(
            settings.log_format,
            stream=sys.stderr,
            prefer_json=settings.is_prod or bool(getattr(args, "prefer_json_logs", False)),
        )
        configure_logging(settings.log_level, fmt)
    except (SettingsError, ValueError, DocQueryError) as exc:
        sys.stderr.write(f"docquery: configuration error: {_first_line(exc)}\n")
        return EXIT_USAGE
    try:
        return _run(args, settings)
    except DocQueryError as exc:
        sys.stderr.write(f"docquery: {exc}\n")
        return _exit_code(exc)
    except KeyboardInterrupt:
        sys.stderr.write("docquery: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        # Last resort, as the service's: a bug, in one line. The type and the innermost frame, never the
        # message or a traceback, which may quote a document or the question.
        sys.stderr.write(f"docquery: internal error ({_where(exc)}): a bug, please report this line\n")
        return EXIT_FAILED


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    return f"{type(exc).__name__} at {Path(last.filename).name}:{last.lineno}"


def _run(args: argparse.Namespace, settings: Settings) -> int:
    try:
        return int(args.handler(args, settings))
    except VectorIndexError as exc:
        if is_lock_failure(exc):  # opened by another process between the check and the open
            raise BusyError("the embedded index is open in another process: stop it and retry") from None
        raise


def _exit_code(exc: DocQueryError) -> int:
    if isinstance(exc, BusyError):
        return EXIT_BUSY
    if isinstance(exc, VectorIndexUnreachable | EmbedderUnreachable):
        # Not the 2 of a configuration error, which the ingest Job fails for good (its podFailurePolicy):
        # a Qdrant or embedding server that is restarting is retried.
        return EXIT_UNAVAILABLE
    if isinstance(exc, EmptyIndexError):
        return EXIT_EMPTY
    return EXIT_USAGE


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _plain_text(markdown: str) -> str:
    """One line of sanitised CommonMark as the text a renderer shows (entities, escapes decoded)."""
    parts: list[str] = []
    for token in MarkdownIt("commonmark").parseInline(markdown):
        for child in token.children or ():
            parts.append(" " if child.type in ("softbreak", "hardbreak") else child.content)
    return "".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
