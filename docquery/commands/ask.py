"""``docquery ask QUESTION``: answer one question with the service's pipeline.

In this process by default. When a ``docquery serve`` holds the collection (the embedded engine lets one
process open it), or with ``--server URL``, the question goes to that service instead, with the API key
from ``--api-key-file``; the key's groups then decide what the answer may use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docquery import validation
from docquery.core.errors import BusyError, CollectionMissingError, EmptyIndexError, ServiceUnavailable, UsageProblem
from docquery.core.exits import ExitCode

if TYPE_CHECKING:
    from docquery.config.settings import Settings
    from docquery.core.domain import Answer, Principal
    from docquery.wiring import Components


EMPTY_HINT = 'give it as the first argument, e.g. docquery ask "What is ...?"'


def register(sub: Any) -> None:
    ask = sub.add_parser(
        "ask",
        help="answer a question (locally, or through a running docquery serve)",
        description="Answer a question from the index, in this process or through the docquery serve that holds it.",
    )
    ask.add_argument("question", help="the question (never logged)")
    ask.add_argument("--as-groups", default="", help="the caller's groups, comma-separated; none sees nothing")
    ask.add_argument(
        "--top-k", type=int, default=None, metavar="K",
        help="passages to retrieve, 1..DOCQUERY_RETRIEVAL__MAX_TOP_K (default DOCQUERY_RETRIEVAL__TOP_K)",
    )  # fmt: skip
    ask.add_argument("--collection", default=None, help="collection to ask (default DOCQUERY_QDRANT__COLLECTION)")
    ask.add_argument("--json", action="store_true", help="print the same object POST /v1/query returns")
    ask.add_argument(
        "--api-key-file", type=Path, default=None, metavar="FILE",
        help="a file holding an API key of the docquery serve to ask (when one holds the index, or with --server)",
    )  # fmt: skip
    ask.add_argument(
        "--server", default=None, metavar="URL",
        help="ask the docquery serve at URL (e.g. http://127.0.0.1:8080) with the key from --api-key-file",
    )  # fmt: skip
    ask.set_defaults(handler=run, quiet_logs=True)


def empty_index(settings: Settings, collection: str, why: str) -> EmptyIndexError:
    where = f"DOCQUERY_DATA_DIR={settings.data_dir}" if not settings.qdrant.url else "the Qdrant server"
    return EmptyIndexError(
        f"the index is empty: collection {collection!r} in {where} {why}; "
        "ingest documents first (`docquery ingest PATH`), or point DOCQUERY_DATA_DIR at the index you ingested into"
    )


async def _answer_once(components: Components, question: str, principal: Principal, top_k: int) -> Answer:
    import uuid

    try:
        return await components.pipeline.answer(question, principal, top_k, uuid.uuid4().hex)
    finally:
        await components.release_loop_resources()


def run(args: argparse.Namespace, settings: Settings) -> int:
    # The pipeline's modules load only on the path that needs them: a typo, or a question sent to a
    # running service, costs no model or engine import.
    from docquery.runtime.preflight import check_data_dir, edge_collection

    question = validation.question(args.question, settings, "the question", hint=EMPTY_HINT)
    groups = validation.group_names(args.as_groups, "--as-groups")
    validation.top_k(args.top_k, settings, "--top-k")
    if args.server is not None:
        if args.collection is not None:
            raise UsageProblem("--collection does not apply with --server: the service answers from its own collection")
        return _through_service(args, args.server, question)
    collection = validation.collection(args.collection) or settings.qdrant.collection
    check_data_dir(settings, collection)
    edge = edge_collection(settings, collection)
    if edge is not None and not edge.exists:
        raise empty_index(settings, collection, "does not exist")  # and is not created: a typo must not look like data
    url = _held_by_service(args, settings, collection)
    if url is not None:
        return _through_service(args, url, question)
    if args.api_key_file is not None:
        raise UsageProblem(
            f"--api-key-file: no docquery serve holds collection {collection!r} in DOCQUERY_DATA_DIR; "
            "give --server URL to ask a service elsewhere, or leave --api-key-file out to answer here"
        )
    return _here(args, settings, collection, question, groups)


def _held_by_service(args: argparse.Namespace, settings: Settings, collection: str) -> str | None:
    """The URL of the docquery serve that holds the collection, when one does and records where it listens.

    Without a key file that is exit 3, as before, saying how to ask it instead.
    """
    from docquery.commands.service_record import read_record, record_path
    from docquery.runtime.preflight import check_index_free, edge_collection, lock_holder

    edge = edge_collection(settings, collection)
    holder = lock_holder(edge.path / "wal") if edge is not None else None
    url = read_record(record_path(settings, collection), holder) if holder else None
    try:
        check_index_free(settings, collection)
    except BusyError as busy:
        if url is None:
            raise
        if args.api_key_file is None:
            raise BusyError(
                f"{busy}; or ask it at {url}: add --api-key-file FILE, a file holding its API key"
            ) from None
        return url
    return None


def _through_service(args: argparse.Namespace, url: str, question: str) -> int:
    from docquery.commands import ask_service
    from docquery.core.domain import Answer

    if args.as_groups.strip():
        raise UsageProblem(
            "--as-groups does not apply when asking a running docquery serve: its API key's groups decide what "
            "the answer may use; leave --as-groups out"
        )
    if args.api_key_file is None:
        raise UsageProblem("--server needs --api-key-file FILE, a file holding one of the service's API keys")
    key = ask_service.read_key(args.api_key_file)
    raw = ask_service.query(ask_service.check_server_url(url), key, question, args.top_k)
    try:
        answer = Answer.model_validate_json(raw)
    except ValueError:
        raise ServiceUnavailable(f"the docquery service at {url} sent something that is not an answer") from None
    if args.json:
        sys.stdout.write(raw.decode("utf-8").strip() + "\n")  # the service's object, as it sent it
    else:
        print_answer(answer)
    return ExitCode.OK


def _here(args: argparse.Namespace, settings: Settings, collection: str, question: str, groups: frozenset[str]) -> int:
    import asyncio

    from docquery.core.domain import Principal
    from docquery.wiring import build_components

    top_k = validation.top_k(args.top_k, settings, "--top-k")
    try:
        components = build_components(settings, collection=collection, lazy_model=True, create_index=False)
    except CollectionMissingError:
        raise empty_index(settings, collection, "does not exist") from None
    try:
        if components.index.count_chunks() == 0:
            raise empty_index(settings, collection, "holds no documents")
        principal = Principal(id="cli", groups=groups)
        answer = asyncio.run(_answer_once(components, question, principal, top_k))
    finally:
        components.close()
    if args.json:
        sys.stdout.write(answer.model_dump_json() + "\n")
    else:
        print_answer(answer)
    return ExitCode.OK


def print_answer(answer: Answer) -> None:
    from rich.console import Console

    console = Console()
    console.soft_wrap = not console.is_terminal  # a pipe or a log gets whole lines, never cut at 80 columns
    # The answer is sanitised CommonMark: a terminal shows it rendered; piped output keeps the markdown.
    # Citation title, source and page are plain text, printed as they are (never Markdown here).
    console.print(f"[bold]Answer[/bold] ({answer.mode}, {answer.model})", highlight=False)
    if console.is_terminal:
        from rich.markdown import Markdown

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
