"""The RAG pipeline shared by the HTTP API and ``docquery ask``.

embed question (awaited: a remote call, or the local model on a worker thread) -> ACL-filtered search inside the index
-> relevance threshold (refuse when nothing passes) -> fenced prompt
-> generator -> citation mapping -> sanitising.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from docquery.domain import AclFilter, Answer, Citation, Hit, Principal
from docquery.ports import Embedder, Generator, SearchMode, VectorIndex
from docquery.rag.conversation import (
    ConversationConfig,
    Turn,
    bounded,
    condense_prompt,
    extractive_query,
    rewritten_or_original,
)
from docquery.rag.prompting import REFUSAL, build_prompt, citations_for, cites_a_source, drop_invented_citations
from docquery.rag.sanitize import Sanitizer, StreamSanitizer


@dataclass(frozen=True)
class RetrievalConfig:
    # No defaults: the values (and their reasons) live in settings.RetrievalSettings.
    mode: SearchMode
    min_dense_score: float


@dataclass
class Trace:
    """Per-request timings and ids, filled in by the pipeline for metrics, audit and Server-Timing.

    Only ids, counts and durations: never question, chunk or answer text.
    """

    embed_s: float = 0.0
    search_s: float = 0.0
    llm_ttft_s: float | None = None
    llm_total_s: float | None = None
    deltas: int = 0
    refused: bool = False
    rewritten: bool = False  # the conversation changed the question searched (the audit notes it, not the text)
    hits: list[Hit] = field(default_factory=list)

    @property
    def doc_ids(self) -> list[str]:
        return list(dict.fromkeys(h.chunk.doc_id for h in self.hits))

    @property
    def chunk_ids(self) -> list[str]:
        return [h.chunk.id for h in self.hits]


@dataclass(frozen=True)
class StreamEvent:
    event: str  # citations | delta | done | error
    data: dict[str, Any]


class RagPipeline:
    def __init__(
        self,
        *,
        embedder: Embedder,
        index: VectorIndex,
        generator: Generator,
        sanitizer: Sanitizer,
        retrieval: RetrievalConfig,
        conversation: ConversationConfig | None = None,
    ) -> None:
        self.embedder = embedder
        self.index = index
        self.generator = generator
        self.sanitizer = sanitizer
        self.retrieval = retrieval
        self.conversation = conversation  # None: earlier turns are not used

    async def standalone(self, question: str, history: list[Turn], *, trace: Trace | None = None) -> str:
        """The question to search and answer, given earlier turns (docquery.rag.conversation).

        Only the question changes: the ACL still comes from the principal alone, and history
        never enters a prompt that carries sources.
        """
        cfg = self.conversation
        turns = bounded(history, cfg) if cfg is not None else []
        if cfg is None or not turns:
            return question
        if self.generator.mode == "generative":
            reply = await self.generator.complete(condense_prompt(question, turns))
            out = rewritten_or_original(reply, question, cfg.max_question_chars)
        else:
            out = extractive_query(question, turns)
        if trace is not None:
            trace.rewritten = out != question
        return out

    async def search(self, question: str, principal: Principal, top_k: int, *, trace: Trace | None = None) -> list[Hit]:
        """ACL-filtered hits. The filter comes from the verified principal only."""
        acl: AclFilter = principal.acl()
        if acl.allows_nothing:
            return []
        t0 = time.perf_counter()
        dense = (await self.embedder.aembed([question], query=True))[0] if self.retrieval.mode != "sparse" else None
        t1 = time.perf_counter()
        hits = await self.index.search(dense=dense, text=question, acl=acl, limit=top_k, mode=self.retrieval.mode)
        if trace is not None:
            trace.embed_s += t1 - t0
            trace.search_s += time.perf_counter() - t1
            trace.hits = list(hits)
        return hits

    def relevant(self, hits: list[Hit]) -> list[Hit]:
        floor = self.retrieval.min_dense_score
        return [h for h in hits if h.dense_score is None or h.dense_score >= floor]

    def citations(self, hits: list[Hit]) -> list[Citation]:
        """Citations for ``hits``, their title and snippet sanitised (text from documents)."""
        return citations_for(hits, clean=self.sanitizer)

    async def answer(
        self, question: str, principal: Principal, top_k: int, request_id: str, *, trace: Trace | None = None
    ) -> Answer:
        trace = trace if trace is not None else Trace()
        hits = self.relevant(await self.search(question, principal, top_k, trace=trace))
        trace.hits = hits
        if not hits:
            trace.refused = True
            return self._refusal(request_id)
        prompt = build_prompt(question, hits)
        t0 = time.perf_counter()
        text = await self.generator.complete(prompt)
        trace.llm_total_s = trace.llm_ttft_s = time.perf_counter() - t0
        trace.deltas = len(text.split())
        text = self.sanitizer(drop_invented_citations(text, len(hits)))
        return Answer(
            answer=text,
            mode=self.generator.mode,
            citations=self.citations(hits),
            model=self.generator.model,
            request_id=request_id,
            uncited=self.generator.mode == "generative" and not cites_a_source(text, len(hits)),
        )

    async def answer_stream(
        self, question: str, principal: Principal, top_k: int, request_id: str, *, trace: Trace | None = None
    ) -> AsyncIterator[StreamEvent]:
        trace = trace if trace is not None else Trace()
        hits = self.relevant(await self.search(question, principal, top_k, trace=trace))
        trace.hits = hits
        if not hits:
            trace.refused = True
            refusal = self._refusal(request_id)
            yield StreamEvent("citations", {"citations": []})
            yield StreamEvent("delta", {"text": refusal.answer})
            yield StreamEvent("done", {"request_id": request_id, "mode": refusal.mode, "model": refusal.model})
            return
        citations = self.citations(hits)
        yield StreamEvent("citations", {"citations": [c.model_dump() for c in citations]})
        stream = StreamSanitizer(self.sanitizer)
        cites = _CitationFilter(len(hits))
        t0 = time.perf_counter()
        async for delta in self.generator.stream(build_prompt(question, hits)):
            if trace.llm_ttft_s is None:
                trace.llm_ttft_s = time.perf_counter() - t0
            trace.deltas += 1
            safe = stream.feed(cites.feed(delta))
            if safe:
                yield StreamEvent("delta", {"text": safe})
        trace.llm_total_s = time.perf_counter() - t0
        tail = stream.feed(cites.flush()) + stream.flush()
        if tail:
            yield StreamEvent("delta", {"text": tail})
        uncited = self.generator.mode == "generative" and not cites.cited
        yield StreamEvent(
            "done",
            {"request_id": request_id, "mode": self.generator.mode, "model": self.generator.model, "uncited": uncited},
        )

    def _refusal(self, request_id: str) -> Answer:
        return Answer(
            answer=REFUSAL, mode=self.generator.mode, citations=[], model=self.generator.model, request_id=request_id
        )


class _CitationFilter:
    """Streaming version of ``drop_invented_citations``: holds back a partial ``[S..``."""

    def __init__(self, n_sources: int) -> None:
        self._n = n_sources
        self._pending = ""
        self.cited = False  # a marker for a returned source went out

    def feed(self, delta: str) -> str:
        self._pending += delta
        idx = self._pending.rfind("[")
        if idx != -1 and "]" not in self._pending[idx:] and len(self._pending) - idx <= 8:
            ready, self._pending = self._pending[:idx], self._pending[idx:]
        else:
            ready, self._pending = self._pending, ""
        return self._release(ready)

    def _release(self, ready: str) -> str:
        out = drop_invented_citations(ready, self._n)
        self.cited = self.cited or cites_a_source(out, self._n)
        return out

    def flush(self) -> str:
        ready, self._pending = self._pending, ""
        return self._release(ready)
