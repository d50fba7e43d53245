"""OpenAI-compatible facade: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Existing OpenAI clients and chat UIs can use DocQuery as a model. The answer
comes from the same RAG pipeline (same ACL filter, threshold, sanitiser),
asked with the last user message. Earlier user and assistant turns only help
decide what to search for (docquery.rag.conversation): they never reach the
answer prompt's data fence, and system, developer and tool messages are ignored.
Sources are appended to the content (for UIs) and given as ``citations``.

What the facade cannot honour is refused, not ignored: another ``model``
(404 ``model_not_found``), more than one choice, tools and functions, a
response format, log probabilities (422, OpenAI's error shape with ``param``).
A client that asked for JSON mode or a tool call and silently got prose would
act on an answer it did not ask for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from fastapi.routing import APIRoute

from docquery.api.context import RequestContext
from docquery.api.deps import LlmSlot, QueryCall
from docquery.api.errors import ApiError, translate
from docquery.api.limits import check_question, check_top_k
from docquery.api.openai_schemas import MAX_TOKENS, AssistantMessage, ChatCompletion, Choice, Usage
from docquery.api.schemas import ChatCompletionRequest, ChatMessage, ContentPart, ModelCard, ModelList, StreamOptions
from docquery.api.sse import STREAM_HEADERS, sse_data
from docquery.core.domain import Citation, FinishReason, TokenMeter
from docquery.rag.citation_fields import sources_markdown
from docquery.rag.conversation import Turn
from docquery.rag.pipeline import StreamEvent
from docquery.rag.sanitize import Sanitizer

log = logging.getLogger("docquery.api")


class _OpenAIRoute(APIRoute):
    """Schema validation errors in OpenAI's shape: ``param`` names the field at fault, ``code`` what is wrong.

    The field is named only when it is one of the request's own (a key the client invented is its text,
    never echoed); ``code`` is pydantic's error kind (``missing``, ``string_type``, ``extra_forbidden``...).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise _invalid(exc) from None

        return route


def _invalid(exc: RequestValidationError) -> ApiError:
    errors = exc.errors()
    first = errors[0] if errors else {}
    kind = str(first.get("type", "invalid"))
    if kind == "json_invalid":
        return ApiError(422, "invalid request: the body is not valid JSON", type_="invalid_request_error", code=kind)
    path = [p for p in first.get("loc", ()) if p != "body"]
    # The known part of the location: pydantic appends the union member it tried ("str", ...).
    known = next((path[:n] for n in range(len(path), 0, -1) if _known(path[:n])), [])
    param = ".".join(str(p) for p in known) if known and isinstance(known[-1], str) else None
    where = param or ("<unknown field>" if kind == "extra_forbidden" else "body")
    return ApiError(422, f"invalid request: {where}: {kind}", type_="invalid_request_error", param=param, code=kind)


def _known(path: list[Any]) -> bool:
    """Whether every part of ``path`` is an index or a field name of the request's schema."""
    return all(isinstance(p, int) or str(p) in _FIELDS for p in path)


_FIELDS = frozenset(
    name for model in (ChatCompletionRequest, ChatMessage, ContentPart, StreamOptions) for name in model.model_fields
)
router = APIRouter(prefix="/v1", route_class=_OpenAIRoute)

MODEL_ID = "docquery"


@router.get("/models", response_model=ModelList)
async def models(call: QueryCall) -> ModelList:
    """The facade's one model. ``call`` is the authorisation (401, 403, 429); nothing else is needed."""
    return ModelList(data=[ModelCard(id=MODEL_ID)])


@router.get("/models/{model_id}", response_model=ModelCard)
async def retrieve_model(model_id: Annotated[str, Path(max_length=256)], call: QueryCall) -> ModelCard:
    """``models.retrieve``: the one model, or 404 ``model_not_found``."""
    _check_model(model_id)
    return ModelCard(id=MODEL_ID)


def _check_model(name: str | None) -> None:
    # The name is the client's text: not echoed back.
    if name is not None and name != MODEL_ID:
        raise ApiError(
            404,
            f"model not found: this service serves one model, {MODEL_ID!r} (GET /v1/models)",
            type_="invalid_request_error",
            param="model",
            code="model_not_found",
        )


def _unsupported(param: str, what: str) -> ApiError:
    return ApiError(
        422,
        f"unsupported parameter: {param}: {what}",
        type_="invalid_request_error",
        param=param,
        code="unsupported_parameter",
    )


def _check_supported(body: ChatCompletionRequest) -> None:
    """Refuse what the facade would otherwise silently not do."""
    if body.n is not None and body.n != 1:
        raise _unsupported("n", "only one choice (n=1) is served")
    for name, value in (("tools", body.tools), ("functions", body.functions)):
        if value:
            raise _unsupported(name, "tool and function calls are not served")
    for name, choice in (("tool_choice", body.tool_choice), ("function_call", body.function_call)):
        if choice is not None and choice != "none":
            raise _unsupported(name, 'tool and function calls are not served (only "none")')
    fmt = body.response_format
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text" and len(fmt) == 1):
        raise _unsupported("response_format", 'answers are text: only {"type": "text"}')
    if body.logprobs:
        raise _unsupported("logprobs", "log probabilities are not served")
    if body.top_logprobs is not None:
        raise _unsupported("top_logprobs", "log probabilities are not served")


def usage_of(meter: TokenMeter) -> Usage:
    """The meter's counts, each clamped to ``MAX_TOKENS`` (the upstream's own report is not trusted)."""
    prompt, completion = min(meter.prompt_tokens, MAX_TOKENS), min(meter.completion_tokens, MAX_TOKENS)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=min(prompt + completion, MAX_TOKENS))


def _question(body: ChatCompletionRequest) -> tuple[str, list[Turn]]:
    """The last user message, and the user/assistant turns before it (the pipeline bounds them)."""
    for i in range(len(body.messages) - 1, -1, -1):
        if body.messages[i].role == "user":
            earlier = [Turn(m.role, m.text()) for m in body.messages[:i] if m.role in ("user", "assistant")]
            return body.messages[i].text(), earlier
    raise ApiError(422, "invalid request: messages: no user message")


_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A chat.completion object, or with stream=true an event stream of chat.completion.chunk "
        "objects (``data:`` lines, then ``data: [DONE]``)",
        "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/ChatCompletionChunk"}}},
    }
}


@router.post("/chat/completions", response_model=ChatCompletion, responses=_STREAM_DOC)
async def chat_completions(body: ChatCompletionRequest, call: QueryCall) -> ChatCompletion | Response:
    principal, c, settings, ctx = call.principal, call.components, call.settings, call.ctx
    _check_model(body.model)
    _check_supported(body)
    asked, history = _question(body)
    question = check_question(asked, settings, field="messages")
    top_k = check_top_k(None, settings)
    trace = ctx.use_trace()
    slot = call.llm_slot()
    await slot.take()  # before the rewrite: every LLM call of the request counts against the caller's share
    search = await c.pipeline.standalone(question, history, principal, trace=trace)
    cid, created = f"chatcmpl-{ctx.request_id}", int(time.time())
    if not body.stream:
        async with slot:
            answer = await c.pipeline.answer(question, principal, top_k, ctx.request_id, search_for=search, trace=trace)
        ctx.outcome = "refused" if trace.refused else "answered"
        content = answer.answer + sources_markdown(answer.citations, c.pipeline.sanitizer)
        completion = ChatCompletion(
            id=cid,
            created=created,
            model=MODEL_ID,
            # "length": the LLM stopped at its token limit and the answer is truncated.
            choices=[Choice(message=AssistantMessage(content=content), finish_reason=_finish(answer.finish_reason))],
            usage=usage_of(trace.tokens),
            citations=answer.citations,
            mode=answer.mode,
            request_id=ctx.request_id,
        )
        return completion
    events = c.pipeline.answer_stream(question, principal, top_k, ctx.request_id, search_for=search, trace=trace)
    head = await slot.prime(events)
    ctx.outcome = "refused" if trace.refused else "answered"
    usage = body.stream_options is not None and body.stream_options.include_usage
    meter = trace.tokens if usage else None
    stream = _chunks(
        head, events=events, ctx=ctx, cid=cid, created=created, slot=slot, meter=meter, sanitizer=c.pipeline.sanitizer
    )
    return StreamingResponse(stream, media_type="text/event-stream", headers=STREAM_HEADERS)


def _finish(reason: FinishReason | None) -> FinishReason:
    return reason or "stop"


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
    meter: TokenMeter | None,
    sanitizer: Sanitizer,
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
            footer = sources_markdown(citations, sanitizer)
            tail = sse_data(_chunk(cid, created, {"content": footer})) if footer else b""
            finish = _finish(ev.data.get("finish_reason"))
            tail += sse_data(_chunk(cid, created, {}, finish))
            if meter is not None:  # stream_options.include_usage: a last chunk with no choices, as OpenAI sends
                tail += sse_data({**_chunk(cid, created, {}), "choices": [], "usage": usage_of(meter).model_dump()})
            return tail
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
