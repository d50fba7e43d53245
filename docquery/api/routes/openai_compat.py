"""OpenAI-compatible facade: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Existing OpenAI clients and chat UIs can use DocQuery as a model. The answer
comes from the same RAG pipeline (same ACL filter, threshold, sanitiser),
asked with the last user message. Earlier user and assistant turns only help
decide what to search for (docquery.rag.conversation): they never reach the
answer prompt's data fence, and system, developer and tool messages are ignored.
Sources are appended to the content (for UIs) and given as ``citations``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from docquery.api.context import RequestContext
from docquery.api.deps import LlmSlot, QueryCall
from docquery.api.errors import ApiError, translate
from docquery.api.limits import check_question, check_top_k
from docquery.api.schemas import ChatCompletionRequest, ModelCard, ModelList
from docquery.api.sse import STREAM_HEADERS, sse_data
from docquery.core.domain import Citation
from docquery.rag.conversation import Turn
from docquery.rag.pipeline import StreamEvent

log = logging.getLogger("docquery.api")
router = APIRouter(prefix="/v1")

MODEL_ID = "docquery"


@router.get("/models", response_model=ModelList)
async def models(call: QueryCall) -> ModelList:
    """The facade's one model. ``call`` is the authorisation (401, 403, 429); nothing else is needed."""
    return ModelList(data=[ModelCard(id=MODEL_ID)])


def _question(body: ChatCompletionRequest) -> tuple[str, list[Turn]]:
    """The last user message, and the user/assistant turns before it (the pipeline bounds them)."""
    for i in range(len(body.messages) - 1, -1, -1):
        if body.messages[i].role == "user":
            earlier = [Turn(m.role, m.text()) for m in body.messages[:i] if m.role in ("user", "assistant")]
            return body.messages[i].text(), earlier
    raise ApiError(422, "invalid request: messages: no user message")


def sources_footer(citations: list[Citation]) -> str:
    """The citations as text for chat UIs. Their fields are already safe (``RagPipeline.citations``),
    and safe pieces joined with fixed text stay safe: not sanitised again (that would escape twice)."""
    if not citations:
        return ""
    lines = [f"[{c.id}] {c.title or c.source} ({c.source})" for c in citations]
    return "\n\nSources:\n" + "\n".join(lines)


@router.post("/chat/completions", responses={200: {"content": {"text/event-stream": {}}}})
async def chat_completions(body: ChatCompletionRequest, call: QueryCall) -> Any:
    principal, c, settings, ctx = call.principal, call.components, call.settings, call.ctx
    asked, history = _question(body)
    question = check_question(asked, settings, field="messages")
    top_k = check_top_k(None, settings)
    trace = ctx.use_trace()
    question = await c.pipeline.standalone(question, history, trace=trace)
    cid, created = f"chatcmpl-{ctx.request_id}", int(time.time())
    if not body.stream:
        async with call.llm_slot():
            answer = await c.pipeline.answer(question, principal, top_k, ctx.request_id, trace=trace)
        ctx.outcome = "refused" if trace.refused else "answered"
        content = answer.answer + sources_footer(answer.citations)
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": MODEL_ID,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        # "length": the LLM stopped at its token limit and the answer is truncated.
                        "finish_reason": answer.finish_reason or "stop",
                    }
                ],
                "citations": [x.model_dump() for x in answer.citations],
                "mode": answer.mode,
                "request_id": ctx.request_id,
            }
        )
    slot = call.llm_slot()
    events = c.pipeline.answer_stream(question, principal, top_k, ctx.request_id, trace=trace)
    head = await slot.prime(events)
    ctx.outcome = "refused" if trace.refused else "answered"
    stream = _chunks(head, events=events, ctx=ctx, cid=cid, created=created, slot=slot)
    return StreamingResponse(stream, media_type="text/event-stream", headers=STREAM_HEADERS)


def _chunk(cid: str, created: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


async def _chunks(
    head: list[StreamEvent],
    *,
    events: AsyncIterator[StreamEvent],
    ctx: RequestContext,
    cid: str,
    created: int,
    slot: LlmSlot,
) -> AsyncIterator[bytes]:
    citations: list[Citation] = []

    def encode(ev: StreamEvent) -> bytes:
        nonlocal citations
        if ev.event == "citations":
            citations = [Citation.model_validate(x) for x in ev.data["citations"]]
            return sse_data(_chunk(cid, created, {}, citations=ev.data["citations"]))
        if ev.event == "delta":
            return sse_data(_chunk(cid, created, {"content": ev.data["text"]}))
        if ev.event == "done":
            footer = sources_footer(citations)
            tail = sse_data(_chunk(cid, created, {"content": footer})) if footer else b""
            return tail + sse_data(_chunk(cid, created, {}, ev.data.get("finish_reason") or "stop"))
        return b""

    try:
        # The role chunk and the primed events go out as one write.
        yield sse_data(_chunk(cid, created, {"role": "assistant", "content": ""})) + b"".join(map(encode, head))
        async for ev in events:
            chunk = encode(ev)
            if chunk:
                yield chunk
        yield b"data: [DONE]\n\n"
    except Exception as exc:
        err = translate(exc)
        log.warning("chat stream %s failed after start: %s", ctx.request_id, type(exc).__name__)
        ctx.outcome = f"error:{err.type}"
        yield sse_data({"error": {"type": err.type, "message": err.message, "request_id": ctx.request_id}})
        yield b"data: [DONE]\n\n"
    finally:
        slot.give_back()
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
