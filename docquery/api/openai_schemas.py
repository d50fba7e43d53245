"""Response bodies of the OpenAI facade, typed so the OpenAPI document shows what clients get.

Field names and nesting follow OpenAI's chat completion objects; DocQuery adds
``citations``, ``mode`` and ``request_id`` beside them (OpenAI clients ignore
unknown fields).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from docquery.core.domain import Citation, FinishReason

# Counts past a 32-bit signed integer are not real (an upstream reported 10**40): they are clamped,
# so clients that read usage into an int32 still can.
MAX_TOKENS = 2**31 - 1


class Usage(BaseModel):
    """Tokens of the language-model calls behind one answer (the follow-up rewrite included)."""

    prompt_tokens: int = Field(ge=0, le=MAX_TOKENS)
    completion_tokens: int = Field(ge=0, le=MAX_TOKENS)
    total_tokens: int = Field(ge=0, le=MAX_TOKENS)


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason = Field(
        description='"length": the language model stopped at its token limit and the answer is truncated.'
    )


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    citations: list[Citation]
    mode: Literal["generative", "extractive"]
    request_id: str


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(BaseModel):
    """One ``data:`` line of a streamed answer. The first chunk after the role carries ``citations``;
    with ``stream_options.include_usage`` a last chunk has no choices and carries ``usage``."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    citations: list[Citation] | None = None
    usage: Usage | None = None
