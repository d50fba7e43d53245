"""``POST /v1/query`` (JSON or SSE) and ``POST /v1/search`` (citations only)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import Response, StreamingResponse

from docquery.api.answer_html import AnswerHtml
from docquery.api.context import RequestContext
from docquery.api.deps import LlmSlot, QueryCall
from docquery.api.errors import translate
from docquery.api.limits import check_history, check_question, check_top_k
from docquery.api.schemas import Answer, QueryRequest, SearchRequest, SearchResponse
from docquery.api.sse import STREAM_HEADERS, sse
from docquery.rag.pipeline import StreamEvent

log = logging.getLogger("docquery.api")
router = APIRouter(prefix="/v1")

_STREAM_DOC = {
    200: {
        "description": "JSON answer, or with stream=true an event stream: citations, delta..., done (or error)",
        "content": {"text/event-stream": {}},
    }
}


@router.post("/query", response_model=Answer, responses=_STREAM_DOC)  # type: ignore[arg-type]
async def query(body: QueryRequest, call: QueryCall) -> Answer | Response:
    principal, c, settings, ctx = call.principal, call.components, call.settings, call.ctx
    question = check_question(body.question, settings)
    top_k = check_top_k(body.top_k, settings)
    history = check_history(body.history, settings)
    trace = ctx.use_trace()
    slot = call.llm_slot()
    await slot.take()  # before the rewrite: every LLM call of the request counts against the caller's share
    search = await c.pipeline.standalone(question, history, principal, trace=trace)
    if not body.stream:
        async with slot:
            answer = await c.pipeline.answer(question, principal, top_k, ctx.request_id, search_for=search, trace=trace)
        ctx.outcome = "refused" if trace.refused else "answered"
        return Answer(**dict(answer), answer_html=_renderer(call)(answer.answer))
    events = c.pipeline.answer_stream(question, principal, top_k, ctx.request_id, search_for=search, trace=trace)
    head = await slot.prime(events)
    ctx.outcome = "refused" if trace.refused else "answered"
    body_stream = _stream_body(head, events, ctx, slot, _renderer(call))
    return StreamingResponse(body_stream, media_type="text/event-stream", headers=STREAM_HEADERS)


def _renderer(call: QueryCall) -> AnswerHtml:
    renderer: AnswerHtml = call.request.app.state.answer_html
    return renderer


class _Rendered:
    """Keeps the streamed answer's deltas so the final event carries the whole answer as HTML."""

    def __init__(self, render: AnswerHtml) -> None:
        self._render = render
        self._parts: list[str] = []

    def event(self, ev: StreamEvent) -> bytes:
        if ev.event == "delta":
            self._parts.append(str(ev.data.get("text", "")))
        elif ev.event == "done":
            return sse(ev.event, {**ev.data, "answer_html": self._render("".join(self._parts))})
        return sse(ev.event, ev.data)


async def _stream_body(
    head: list[StreamEvent], events: AsyncIterator[StreamEvent], ctx: RequestContext, slot: LlmSlot, render: AnswerHtml
) -> AsyncIterator[bytes]:
    rendered = _Rendered(render)
    try:
        # The primed events go out as one chunk: one write instead of one per event.
        yield b"".join(rendered.event(ev) for ev in head)
        async for ev in events:
            yield rendered.event(ev)
    except Exception as exc:
        err = translate(exc)
        log.warning("stream %s failed after start: %s", ctx.request_id, type(exc).__name__)
        ctx.outcome = f"error:{err.type}"
        yield sse("error", {"error": {"type": err.type, "message": err.message, "request_id": ctx.request_id}})
    finally:
        slot.give_back()
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


@router.post("/search", response_model=SearchResponse)
async def search(body: SearchRequest, call: QueryCall) -> SearchResponse:
    principal, c, settings, ctx = call.principal, call.components, call.settings, call.ctx
    text = check_question(body.query, settings, field="query")
    top_k = check_top_k(body.top_k, settings, default=10)
    trace = ctx.use_trace()
    hits = c.pipeline.relevant(await c.pipeline.search(text, principal, top_k, trace=trace))
    trace.hits = hits
    ctx.outcome = "found" if hits else "empty"
    return SearchResponse(citations=c.pipeline.citations(hits, text), request_id=ctx.request_id)
