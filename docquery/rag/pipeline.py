"""The RAG pipeline shared by the HTTP API and ``docquery ask``.

embed question (awaited: a remote call, or the local model on a worker thread) -> ACL-filtered search inside the index
-> relevance threshold (refuse when nothing passes) -> fenced prompt
-> generator (a one-shot answer's snippets are chosen while it writes) -> citation mapping -> sanitising.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from docquery.core.domain import AclFilter, Answer, Citation, FinishReason, Hit, Principal, Prompt, TokenMeter
from docquery.core.ports import Embedder, Generator, SearchMode, VectorIndex
from docquery.rag.citation_fields import plain_field
from docquery.rag.citations import citations_for
from docquery.rag.conversation import (
    ConversationConfig,
    Turn,
    bounded,
    condense_prompt,
    extractive_query,
    rewritten_or_original,
)
from docquery.rag.prompting import REFUSAL, build_prompt, cites_a_source, drop_invented_citations
from docquery.rag.sanitize import Sanitizer
from docquery.rag.sanitize_stream import StreamSanitizer


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
    tokens: TokenMeter = field(default_factory=TokenMeter)

    @property
    def doc_ids(self) -> list[str]:
        return list(dict.fromkeys(h.chunk.doc_id for h in self.hits))

    @property
    def chunk_ids(self) -> list[str]:
        return [h.chunk.id for h in self.hits]


@runtime_checkable
class ReportsFinish(Protocol):
    """A generator that also says why the LLM stopped (the OpenAI-compatible one does).

    Others (the extractive fallback) are taken to have finished normally ("stop").
    """

    async def complete_finish(
        self, prompt: Prompt, *, meter: TokenMeter | None = None
    ) -> tuple[str, FinishReason | None]: ...

    def stream_finish(
        self, prompt: Prompt, *, meter: TokenMeter | None = None
    ) -> AsyncIterator[tuple[str, FinishReason | None]]: ...


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

    async def standalone(
        self, question: str, history: list[Turn], principal: Principal, *, trace: Trace | None = None
    ) -> str:
        """The text to search for, given earlier turns (docquery.rag.conversation).

        It is for retrieval only (``answer(..., search_for=...)``): the answer prompt gets the
        caller's own question. The ACL still comes from the principal alone, and history never
        enters a prompt that carries sources. A caller who may read nothing gets no rewrite:
        its search finds nothing, so no LLM call is made on its behalf.
        """
        cfg = self.conversation
        turns = bounded(history, cfg) if cfg is not None else []
        if cfg is None or not turns or principal.acl().allows_nothing:
            return question
        if self.generator.mode == "generative":
            condense = condense_prompt(question, turns)
            if self._reports_finish is not None:
                meter = trace.tokens if trace is not None else None
                reply = (await self._reports_finish.complete_finish(condense, meter=meter))[0]
            else:
                reply = await self.generator.complete(condense)
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

    @property
    def generator(self) -> Generator:
        return self._generator

    @generator.setter
    def generator(self, generator: Generator) -> None:
        # Decided once per generator, like the embedder above.
        self._generator = generator
        self._reports_finish = generator if isinstance(generator, ReportsFinish) else None

    def citations(self, hits: list[Hit], question: str = "") -> list[Citation]:
        """Citations for ``hits``, each snippet chosen for ``question``; every string from the index came
        from a document: the snippet is a quotable run the sanitiser leaves alone, title, source and page
        plain text (``citation_fields``)."""
        label = self.sanitizer.label
        citations = citations_for(hits, clean=label, question=question)
        for c in citations:  # built just above and not shared: finished in place, not copied
            c.doc_id = label(c.doc_id)
            c.title = plain_field(c.title)
            c.source = plain_field(c.source)
            c.page = None if c.page is None else plain_field(c.page)
        return citations

    async def answer(
        self,
        question: str,
        principal: Principal,
        top_k: int,
        request_id: str,
        *,
        search_for: str | None = None,
        trace: Trace | None = None,
    ) -> Answer:
        """``search_for``: the text retrieval uses (``standalone``'s rewrite); the prompt asks ``question``."""
        trace = trace if trace is not None else Trace()
        hits = self.relevant(await self.search(search_for or question, principal, top_k, trace=trace))
        trace.hits = hits
        if not hits:
            trace.refused = True
            return self._refusal(request_id)
        t0 = time.perf_counter()
        reply = asyncio.ensure_future(self._complete(build_prompt(question, hits), trace.tokens))
        try:
            # The snippets are chosen while the LLM writes: after the call's task ran to its first wait (on
            # a pooled connection, the request is sent), so they do not delay it; not after, adding to the
            # answer's time.
            await asyncio.sleep(0)
            citations = self.citations(hits, question)
            text, finish = await reply
        finally:
            reply.cancel()  # a no-op once answered; if the snippets failed, the answer would go nowhere
        trace.llm_total_s = trace.llm_ttft_s = time.perf_counter() - t0
        trace.deltas = len(text.split())
        text = self.sanitizer(drop_invented_citations(text, len(hits)))
        return Answer(
            answer=text,
            mode=self.generator.mode,
            citations=citations,
            model=self.generator.model,
            request_id=request_id,
            finish_reason=finish,
            uncited=self.generator.mode == "generative" and not cites_a_source(text, len(hits)),
        )

    async def answer_stream(
        self,
        question: str,
        principal: Principal,
        top_k: int,
        request_id: str,
        *,
        search_for: str | None = None,
        trace: Trace | None = None,
    ) -> AsyncIterator[StreamEvent]:
        trace = trace if trace is not None else Trace()
        hits = self.relevant(await self.search(search_for or question, principal, top_k, trace=trace))
        trace.hits = hits
        if not hits:
            trace.refused = True
            refusal = self._refusal(request_id)
            yield StreamEvent("citations", {"citations": []})
            yield StreamEvent("delta", {"text": refusal.answer})
            yield StreamEvent(
                "done",
                {"request_id": request_id, "mode": refusal.mode, "model": refusal.model, "finish_reason": "stop"},
            )
            return
        citations = self.citations(hits, question)
        yield StreamEvent("citations", {"citations": [c.model_dump() for c in citations]})
        stream = StreamSanitizer(self.sanitizer)
        cites = _CitationFilter(len(hits))
        finish: list[FinishReason | None] = ["stop"]
        t0 = time.perf_counter()
        async for delta in self._deltas(build_prompt(question, hits), finish, trace.tokens):
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
        done = {"request_id": request_id, "mode": self.generator.mode, "model": self.generator.model}
        uncited = self.generator.mode == "generative" and not cites.cited
        yield StreamEvent("done", {**done, "finish_reason": finish[0], "uncited": uncited})

    async def _complete(self, prompt: Prompt, meter: TokenMeter) -> tuple[str, FinishReason | None]:
        if self._reports_finish is not None:
            return await self._reports_finish.complete_finish(prompt, meter=meter)
        return await self.generator.complete(prompt), "stop"

    async def _deltas(self, prompt: Prompt, finish: list[FinishReason | None], meter: TokenMeter) -> AsyncIterator[str]:
        """The generator's text deltas; ``finish[0]`` is set to the reason it reports, if it does."""
        if self._reports_finish is None:
            async for delta in self.generator.stream(prompt):
                yield delta
            return
        finish[0] = None
        async for delta, reason in self._reports_finish.stream_finish(prompt, meter=meter):
            if reason is not None:
                finish[0] = reason
            if delta:
                yield delta

    def _refusal(self, request_id: str) -> Answer:
        return Answer(
            answer=REFUSAL,
            mode=self.generator.mode,
            citations=[],
            model=self.generator.model,
            request_id=request_id,
            finish_reason="stop",
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
