"""``docquery ask QUESTION``: answer one question in this process, with the service's pipeline."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from typing import TYPE_CHECKING, Any

from docquery import validation
from docquery.core.errors import CollectionMissingError, EmptyIndexError
from docquery.core.exits import ExitCode

if TYPE_CHECKING:
    from docquery.config.settings import Settings
    from docquery.core.domain import Answer, Principal
    from docquery.wiring import Components


EMPTY_HINT = 'give it as the first argument, e.g. docquery ask "What is ...?"'


def register(sub: Any) -> None:
    ask = sub.add_parser("ask", help="answer a question locally (no server)", description="Answer a question locally.")
    ask.add_argument("question", help="the question (never logged)")
    ask.add_argument("--as-groups", default="", help="the caller's groups, comma-separated; none sees nothing")
    ask.add_argument(
        "--top-k", type=int, default=None, metavar="K",
        help="passages to retrieve, 1..DOCQUERY_RETRIEVAL__MAX_TOP_K (default DOCQUERY_RETRIEVAL__TOP_K)",
    )  # fmt: skip
    ask.add_argument("--collection", default=None, help="collection to ask (default DOCQUERY_QDRANT__COLLECTION)")
    ask.add_argument("--json", action="store_true", help="print the same object POST /v1/query returns")
    ask.set_defaults(handler=run)


def empty_index(settings: Settings, collection: str, why: str) -> EmptyIndexError:
    where = f"DOCQUERY_DATA_DIR={settings.data_dir}" if not settings.qdrant.url else "the Qdrant server"
    return EmptyIndexError(
        f"the index is empty: collection {collection!r} in {where} {why}; "
        "ingest documents first (`docquery ingest PATH`), or point DOCQUERY_DATA_DIR at the index you ingested into"
    )


async def _answer_once(components: Components, question: str, principal: Principal, top_k: int) -> Answer:
    try:
        return await components.pipeline.answer(question, principal, top_k, uuid.uuid4().hex)
    finally:
        await components.release_loop_resources()


def run(args: argparse.Namespace, settings: Settings) -> int:
    # The pipeline's modules load here, after the flags are checked: a typo costs no import time.
    from docquery.core.domain import Principal
    from docquery.runtime.preflight import check_data_dir, check_index_free, edge_collection
    from docquery.wiring import build_components

    question = validation.question(args.question, settings, "the question", hint=EMPTY_HINT)
    groups = validation.group_names(args.as_groups, "--as-groups")
    top_k = validation.top_k(args.top_k, settings, "--top-k")
    collection = validation.collection(args.collection) or settings.qdrant.collection
    check_data_dir(settings, collection)
    edge = edge_collection(settings, collection)
    if edge is not None and not edge.exists:
        raise empty_index(settings, collection, "does not exist")  # and is not created: a typo must not look like data
    check_index_free(settings, collection)
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
    from rich.markdown import Markdown

    console = Console()
    console.soft_wrap = not console.is_terminal  # a pipe or a log gets whole lines, never cut at 80 columns
    # Answer and citation fields are sanitised CommonMark: a terminal shows them rendered, so entities
    # and escapes are decoded once ("&lt;string>" reads "<string>"); piped output keeps the markdown.
    shown = _plain_text if console.is_terminal else str
    console.print(f"[bold]Answer[/bold] ({answer.mode}, {answer.model})", highlight=False)
    if console.is_terminal:
        console.print(Markdown(answer.answer, hyperlinks=False))
    else:
        console.print(answer.answer, markup=False, highlight=False)
    if answer.citations:
        console.print("[bold]Citations[/bold]")
        for c in answer.citations:
            where = f" ({shown(c.page)})" if c.page else ""
            console.print(
                f"  [{c.id}] {shown(c.title)} — {shown(c.source)}{where}  score={c.score:.4f}",
                markup=False,
                highlight=False,
            )
    else:
        console.print("[dim]No citations.[/dim]")


def _plain_text(markdown: str) -> str:
    """One line of sanitised CommonMark as the text a renderer shows (entities, escapes decoded)."""
    from markdown_it import MarkdownIt

    parts: list[str] = []
    for token in MarkdownIt("commonmark").parseInline(markdown):
        for child in token.children or ():
            parts.append(" " if child.type in ("softbreak", "hardbreak") else child.content)
    return "".join(parts)
