"""The ``docquery`` console script: serve, ask, eval, and plugin commands.

``docquery ingest`` is contributed by the ``ingest`` package through the
``docquery.commands`` entry-point group, so this module never imports ``ingest``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import uuid
from collections.abc import Sequence
from importlib.metadata import entry_points

from rich.console import Console

from docquery.domain import Answer, Principal
from docquery.errors import DocQueryError
from docquery.evaluation.cli import register as register_eval
from docquery.settings import Settings, SettingsError, load_settings
from docquery.wiring import Components, build_components

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def parse_groups(value: str | None) -> frozenset[str]:
    return frozenset(g.strip() for g in (value or "").split(",") if g.strip())


async def _answer_once(components: Components, question: str, principal: Principal, top_k: int) -> Answer:
    try:
        return await components.pipeline.answer(question, principal, top_k, uuid.uuid4().hex)
    finally:
        await components.release_loop_resources()


def _cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    components = build_components(settings, collection=args.collection)
    try:
        principal = Principal(id="cli", groups=parse_groups(args.as_groups))
        top_k = args.top_k or settings.retrieval.top_k
        answer = asyncio.run(_answer_once(components, args.question, principal, top_k))
    finally:
        components.close()
    if args.json:
        sys.stdout.write(answer.model_dump_json() + "\n")
        return EXIT_OK
    console = Console()
    console.print(f"[bold]Answer[/bold] ({answer.mode}, {answer.model})", highlight=False)
    console.print(answer.answer, markup=False, highlight=False)
    if answer.citations:
        console.print("[bold]Citations[/bold]")
        for c in answer.citations:
            where = f" ({c.page})" if c.page else ""
            console.print(
                f"  [{c.id}] {c.title} — {c.source}{where}  score={c.score:.4f}", markup=False, highlight=False
            )
    else:
        console.print("[dim]No citations.[/dim]")
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from docquery.api.app import create_app
    from docquery.api.server import server_options

    # Raises ConfigError (exit 2) in the prod profile when no auth is configured.
    app = create_app(settings)
    if settings.metrics_port:
        from docquery.api.metrics import start_metrics_server

        # Its own port, so a NetworkPolicy can open metrics to monitoring only.
        start_metrics_server(app.state.metrics, args.host, settings.metrics_port)
    uvicorn.run(app, host=args.host, port=args.port, **server_options(settings.log_level, settings.api))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="docquery", description="Secure question answering over your documents.")
    sub = parser.add_subparsers(dest="command", required=True)

    ask = sub.add_parser("ask", help="answer a question locally (no server)")
    ask.add_argument("question")
    ask.add_argument("--as-groups", default="", help="the caller's groups, comma-separated; none sees nothing")
    ask.add_argument("--top-k", type=int, default=None)
    ask.add_argument("--collection", default=None)
    ask.add_argument("--json", action="store_true", help="print the same object POST /v1/query returns")
    ask.set_defaults(handler=_cmd_ask)

    serve = sub.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(handler=_cmd_serve)

    register_eval(sub)

    for ep in entry_points(group="docquery.commands"):
        ep.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    try:
        settings = load_settings()
    except (SettingsError, ValueError) as exc:
        sys.stderr.write(f"docquery: configuration error: {_first_line(exc)}\n")
        return EXIT_USAGE
    try:
        return int(args.handler(args, settings))
    except DocQueryError as exc:
        sys.stderr.write(f"docquery: {exc}\n")
        return EXIT_USAGE


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


if __name__ == "__main__":
    raise SystemExit(main())
