"""Request and response bodies.

Request models forbid unknown fields where DocQuery defines the API: a
client that sends ``groups`` or ``acl`` learns with a 422 that the server
never takes ACL input from a request. The OpenAI facade ignores unknown
fields, as OpenAI clients send many.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from docquery.core import domain
from docquery.core.domain import Citation, DocumentStatus

# Hard ceilings for the schema; the configured bounds (settings) are checked
# in the routes and are at most these.
MAX_QUESTION_CHARS_CEILING = 100_000
MAX_TOP_K_CEILING = 200
MAX_HISTORY_TURNS_CEILING = 64


def _encodable(text: str) -> str:
    """A lone UTF-16 surrogate ("\\ud800" in JSON) is no text: no encoder, tokenizer or index takes it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid unicode") from None  # the 422 names the field and "value_error"
    return text


# Every string a caller sends that DocQuery reads as text. pydantic refuses lone surrogates in a plain
# ``str`` field but not in every union (a chat message's ``str | list`` took them, and the embedder then
# failed as if it were down: 503), so the check is the type's own, wherever it stands.
CallerText = Annotated[str, AfterValidator(_encodable)]


class HistoryTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: CallerText = Field(max_length=MAX_QUESTION_CHARS_CEILING)


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: CallerText = Field(min_length=1, max_length=MAX_QUESTION_CHARS_CEILING)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K_CEILING)
    stream: bool = False
    history: list[HistoryTurn] = Field(
        default_factory=list,
        max_length=MAX_HISTORY_TURNS_CEILING,
        description="Earlier turns, oldest first, so a follow-up question is understood in context. "
        "Used only to decide what to search for (never as sources, never to widen access); bounded by "
        "conversation.max_history_turns and max_history_chars (422 beyond).",
    )


class Answer(domain.Answer):
    """The ``/v1/query`` answer: the pipeline's, plus its HTML rendering (the schema keeps the name ``Answer``)."""

    answer_html: str = Field(
        description="`answer` rendered as HTML on the server (CommonMark, then an allowlist sanitiser: no image, "
        "script, style or event attribute; links only to `api.link_allowlist` hosts, with "
        'rel="noopener noreferrer"), for clients that show HTML'
    )


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: CallerText = Field(min_length=1, max_length=MAX_QUESTION_CHARS_CEILING)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K_CEILING)


class SearchResponse(BaseModel):
    citations: list[Citation]
    request_id: str


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = Field(max_length=64)
    text: CallerText | None = Field(default=None, max_length=MAX_QUESTION_CHARS_CEILING)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: CallerText | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """The OpenAI chat request. Sampling hints (temperature, max_tokens, ...) are ignored: the server
    sets them for grounded answers. Fields that would change what comes back (more choices, tool calls,
    a response format, log probabilities) are declared so the route can refuse them with a 422."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(default=None, max_length=256)
    messages: list[ChatMessage] = Field(min_length=1, max_length=256)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, description="Only 1 (the default) is served; anything else is a 422.")
    tools: list[Any] | None = Field(default=None, description="Not served: a non-empty list is a 422.")
    tool_choice: Any = Field(default=None, description='Not served: anything but "none" is a 422.')
    functions: list[Any] | None = Field(default=None, description="Not served: a non-empty list is a 422.")
    function_call: Any = Field(default=None, description='Not served: anything but "none" is a 422.')
    response_format: Any = Field(default=None, description='Only {"type": "text"}; anything else is a 422.')
    logprobs: bool | None = Field(default=None, description="Not served: true is a 422.")
    top_logprobs: int | None = Field(default=None, description="Not served: any value is a 422.")


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
    status: DocumentStatus = Field(
        description="Ingest state: indexed (every chunk written and recorded), quarantined (indexed, with chunks "
        "the scan held out of search), pending (an ingest is writing or replacing its chunks, or stopped before "
        "recording them; the next ingest finishes it), or an upload's queued, parsing, embedding, interrupted, "
        'failed or skipped (docs/api.md, "Document status").'
    )


class DocumentList(BaseModel):
    documents: list[DocumentInfo]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page.",
    )
    request_id: str


class ErrorDetail(BaseModel):
    type: str = Field(description="Stable, machine-readable error kind, e.g. invalid_request, rate_limited.")
    message: str = Field(description="One line for a person; never contains document text, questions or secrets.")
    request_id: str = Field(description="The request's id, also in the X-Request-ID header and the audit log.")
    param: str | None = Field(default=None, description="OpenAI facade only: the request field at fault.")
    code: str | None = Field(default=None, description="OpenAI facade only: e.g. model_not_found.")


class ErrorEnvelope(BaseModel):
    """Every error body the API returns."""

    error: ErrorDetail


class DeleteResult(BaseModel):
    doc_id: str
    deleted_chunks: int
    request_id: str


class UploadedDocument(BaseModel):
    doc_id: str
    name: str = Field(description="The file name as sent (checked: one plain name, no path or control characters)")
    status: DocumentStatus


class UploadAccepted(BaseModel):
    job_id: str = Field(description="The batch: `GET /v1/ingest/jobs/{job_id}` counts its documents' states")
    documents: list[UploadedDocument]
    request_id: str


class DocumentStatusInfo(BaseModel):
    doc_id: str
    source: str
    title: str
    status: DocumentStatus
    reason: str = Field(default="", description="Why the document is failed, skipped or quarantined; never its text")
    job_id: str | None = Field(default=None, description="The upload batch that last wrote it; none for the CLI's")
    chunk_count: int
    ingested_at: str
    request_id: str


class JobDocument(BaseModel):
    doc_id: str
    name: str
    status: DocumentStatus
    reason: str = ""


class JobStatus(BaseModel):
    job_id: str
    documents: list[JobDocument] = Field(description="The job's documents the caller may see")
    counts: dict[str, int] = Field(description="Documents in each state (every state named, zeros included)")
    done: bool = Field(description="Every document is in a final state: indexed, quarantined, failed or skipped")
    request_id: str
