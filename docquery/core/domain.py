"""Domain types shared by the query service, the CLI and ingestion."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from docquery.core.collection import PUBLIC_GROUP, is_valid_group_name


class Principal(BaseModel):
    """A verified caller. Built only from a verified credential, never a request body."""

    model_config = ConfigDict(frozen=True)

    id: str
    groups: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    # Groups the caller may give an uploaded document besides its own (an API key's or a token's ``may_grant``).
    may_grant: frozenset[str] = frozenset()
    # Who the caller's LLM share is counted against, when the credential names it (docquery.api.fairshare).
    tenant: str | None = None

    def acl(self) -> AclFilter:
        return AclFilter.for_groups(self.groups)

    def grantable(self) -> frozenset[str]:
        """The groups this caller may give an uploaded document: its own and its ``may_grant``, valid names only."""
        return frozenset(g for g in self.groups | self.may_grant if is_valid_group_name(g))


@dataclass(frozen=True)
class AclFilter:
    """The set of ``acl_groups`` labels a caller may read.

    Fail closed: an empty filter matches nothing, and adapters must return no
    hits for it without asking the index at all. Public documents are visible
    to any caller who has at least one group (no groups, no results).
    """

    labels: tuple[str, ...]

    @classmethod
    def for_groups(cls, groups: frozenset[str] | set[str] | list[str] | tuple[str, ...]) -> AclFilter:
        # As given, never trimmed: " hr" is not "hr". A name no document can carry (the reserved public
        # label among them) grants nothing.
        clean = sorted({g for g in groups if is_valid_group_name(g)})
        if not clean:
            return cls(labels=())
        return cls(labels=(*clean, PUBLIC_GROUP))

    @property
    def allows_nothing(self) -> bool:
        return not self.labels


@dataclass(frozen=True)
class Chunk:
    """A chunk as stored in the index (text already decrypted, when encryption is on)."""

    id: str
    doc_id: str
    source: str
    title: str
    chunk_index: int
    text: str
    content_sha256: str
    acl_groups: tuple[str, ...]
    page: str | None = None
    ingested_at: str = ""
    flags: tuple[str, ...] = ()
    # Where the text sits in its document: section number and character offsets in that section
    # as loaded (None for chunks written before offsets were stored).
    section: int | None = None
    char_start: int | None = None
    char_end: int | None = None


@dataclass(frozen=True)
class QuarantinedChunk:
    """Where a quarantined chunk sits and why it was held, for an operator to judge: no text field,
    so a listing cannot echo what may be hostile or secret."""

    id: str
    doc_id: str
    source: str
    title: str
    page: str | None
    chunk_index: int
    flags: tuple[str, ...]


@dataclass(frozen=True)
class IndexedChunk:
    """What ingestion hands to the index: a chunk plus its dense vector."""

    chunk: Chunk
    dense: list[float]
    quarantined: bool = False
    # What the sparse (BM25) vector is computed from when not the chunk text: the text with its
    # document title in front, as the dense vector was embedded (docquery.chunking.embedding_text).
    index_text: str | None = None


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    dense_score: float | None = None


# A document's ingest state, kept in its record (docs/api.md, "Document status"). ``pending``: the CLI is
# writing it; the rest are an upload's, in order, with one final state. ``indexed`` was stored as
# ``complete`` before uploads existed (read back as ``indexed``).
DocumentStatus = Literal[
    "queued", "parsing", "embedding", "pending", "interrupted", "indexed", "quarantined", "failed", "skipped"
]
DOCUMENT_STATES: tuple[str, ...] = get_args(DocumentStatus)
# Searchable and settled: the plan leaves such a document alone when nothing about it changed.
SETTLED_STATES = frozenset({"indexed", "quarantined"})
# An upload's final states: the spool file is gone and nothing more happens to it.
FINAL_STATES = frozenset({"indexed", "quarantined", "failed", "skipped"})
# States a stopped process leaves behind; the next start re-queues them.
UNFINISHED_STATES = frozenset({"queued", "parsing", "embedding", "interrupted"})


@dataclass(frozen=True)
class DocumentRecord:
    """Per-document state that lets ingest skip, replace and delete documents."""

    doc_id: str
    source: str
    root: str
    content_sha256: str
    chunk_count: int
    acl_groups: tuple[str, ...]
    title: str = ""
    ingested_at: str = ""
    status: DocumentStatus = "indexed"
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class TokenMeter:
    """Tokens one request spent in the language model, as the model's server reports them.

    Filled in by the generator on each call (the follow-up rewrite and the answer); a
    server that reports nothing leaves it at zero.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, report: object) -> None:
        """Add an OpenAI ``usage`` object; anything malformed is ignored (it is upstream's text)."""
        if not isinstance(report, dict):
            return
        prompt, completion = report.get("prompt_tokens"), report.get("completion_tokens")
        if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0:
            self.prompt_tokens += prompt
        if isinstance(completion, int) and not isinstance(completion, bool) and completion >= 0:
            self.completion_tokens += completion


@dataclass(frozen=True)
class Prompt:
    """A built prompt: the chat messages plus the numbered sources (S1 = sources[0])."""

    question: str
    sources: tuple[Hit, ...]
    messages: tuple[dict[str, str], ...]


class Citation(BaseModel):
    id: str
    doc_id: str
    source: str
    title: str
    chunk_index: int
    score: float = Field(
        description="How well the passage matched the question, by the retrieval mode's own scale (docs/api.md, "
        "Citations): higher is better, comparable only between citations of the same answer"
    )
    snippet: str = Field(
        description="The passage's most relevant sentence or sentences: the passage's text from snippet_start "
        "to snippet_end, less control and bidi characters; snippet_truncated says whether the passage has more"
    )
    snippet_start: int = Field(default=0, description="Where the snippet starts in the passage (code points)")
    snippet_end: int = Field(default=0, description="Where the snippet ends (exclusive) in the passage (code points)")
    page: str | None = Field(default=None, description="Page, or heading path, of the passage")
    section: int | None = Field(default=None, description="Number of the document section holding the passage")
    char_start: int | None = Field(default=None, description="Character offset of the passage in its section")
    char_end: int | None = Field(default=None, description="End (exclusive) of the passage in its section")
    snippet_truncated: bool = False


# Why the LLM stopped, as OpenAI-compatible servers report it. "length": cut at its token limit,
# so the answer is truncated. Any other value from the server is not passed on (None).
FinishReason = Literal["stop", "length", "content_filter", "tool_calls"]
FINISH_REASONS: frozenset[str] = frozenset({"stop", "length", "content_filter", "tool_calls"})


class Answer(BaseModel):
    answer: str
    mode: Literal["generative", "extractive"]
    citations: list[Citation] = Field(default_factory=list)
    model: str
    request_id: str
    finish_reason: FinishReason | None = None
    uncited: bool = Field(
        default=False,
        description="A generative answer that cites none of the returned sources: treat it as unsupported",
    )
