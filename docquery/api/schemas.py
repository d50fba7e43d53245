"""Request and response bodies.

Request models forbid unknown fields where DocQuery defines the API: a
client that sends ``groups`` or ``acl`` learns with a 422 that the server
never takes ACL input from a request. The OpenAI facade ignores unknown
fields, as OpenAI clients send many.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from docquery.core.domain import Citation

# Hard ceilings for the schema; the configured bounds (settings) are checked
# in the routes and are at most these.
MAX_QUESTION_CHARS_CEILING = 100_000
MAX_TOP_K_CEILING = 200
MAX_HISTORY_TURNS_CEILING = 64


class HistoryTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_QUESTION_CHARS_CEILING)


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS_CEILING)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K_CEILING)
    stream: bool = False
    history: list[HistoryTurn] = Field(
        default_factory=list,
        max_length=MAX_HISTORY_TURNS_CEILING,
        description="Earlier turns, oldest first, so a follow-up question is understood in context. "
        "Used only to decide what to search for (never as sources, never to widen access); bounded by "
        "conversation.max_history_turns and max_history_chars (422 beyond).",
    )


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS_CEILING)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K_CEILING)


class SearchResponse(BaseModel):
    citations: list[Citation]
    request_id: str


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = Field(max_length=64)
    text: str | None = Field(default=None, max_length=MAX_QUESTION_CHARS_CEILING)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text)


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(default=None, max_length=256)
    messages: list[ChatMessage] = Field(min_length=1, max_length=256)
    stream: bool = False


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "docquery"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class DocumentInfo(BaseModel):
    doc_id: str
    source: str
    title: str
    chunk_count: int
    ingested_at: str
    status: str


class DocumentList(BaseModel):
    documents: list[DocumentInfo]
    request_id: str


class DeleteResult(BaseModel):
    doc_id: str
    deleted_chunks: int
    request_id: str
