"""The RAG pipeline shared by the HTTP API and ``docquery ask``.

embed question (off the event loop) -> ACL-filtered search inside the index
-> relevance threshold (refuse when nothing passes) -> fenced prompt
-> generator -> citation mapping -> sanitising.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from docquery.domain import AclFilter, Answer, Citation, Hit, Principal
from docquery.ports import Embedder, Generator, SearchMode, VectorIndex
from docquery.rag.prompting import REFUSAL, build_prompt, citations_for, drop_invented_citations
from docquery.rag.sanitize import Sanitizer, StreamSanitizer


@dataclass(frozen=True)
class RetrievalConfig:
    mode: SearchMode = "hybrid"
    min_dense_score: float = 0.25


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
    ) -> None:
        self.embedder = embedder
        self.index = index
        self.generator = generator
        self.sanitizer = sanitizer
        self.retrieval = retrieval

    async def search(self, question: str, principal: Principal, top_k: int) -> list[Hit]:
        """ACL-filtered hits. The filter comes from the verified principal only."""
        acl: AclFilter = principal.acl()
        if acl.allows_nothing:
            return []
        mode = self.retrieval.mode
        dense = None
        if mode != "sparse":
            # Embedding is CPU-bound: run it off the event loop.
            dense = (await asyncio.to_thread(self.embedder.embed, [question], query=True))[0]
        return await asyncio.to_thread(self.index.search, dense=dense, text=question, acl=acl, limit=top_k, mode=mode)

    def relevant(self, hits: list[Hit]) -> list[Hit]:
        floor = self.retrieval.min_dense_score
        return [h for h in hits if h.dense_score is None or h.dense_score >= floor]

    def sanitize_citations(self, citations: list[Citation]) -> list[Citation]:
        return [
            c.model_copy(update={"snippet": self.sanitizer(c.snippet), "title": self.sanitizer(c.title)})
            for c in citations
        ]

    async def answer(self, question: str, principal: Principal, top_k: int, request_id: str) -> Answer:
        hits = self.relevant(await self.search(question, principal, top_k))
        if not hits:
            return self._refusal(request_id)
        prompt = build_prompt(question, hits)
        text = await self.generator.complete(prompt)
        text = self.sanitizer(drop_invented_citations(text, len(hits)))
        return Answer(
            answer=text,
            mode=self.generator.mode,
            citations=self.sanitize_citations(citations_for(hits)),
            model=self.generator.model,
            request_id=request_id,
        )

    async def answer_stream(
        self, question: str, principal: Principal, top_k: int, request_id: str
    ) -> AsyncIterator[StreamEvent]:
        hits = self.relevant(await self.search(question, principal, top_k))
        if not hits:
            refusal = self._refusal(request_id)
            yield StreamEvent("citations", {"citations": []})
            yield StreamEvent("delta", {"text": refusal.answer})
            yield StreamEvent("done", {"request_id": request_id, "mode": refusal.mode, "model": refusal.model})
            return
        citations = self.sanitize_citations(citations_for(hits))
        yield StreamEvent("citations", {"citations": [c.model_dump() for c in citations]})
        stream = StreamSanitizer(self.sanitizer)
        cites = _CitationFilter(len(hits))
        async for delta in self.generator.stream(build_prompt(question, hits)):
            safe = stream.feed(cites.feed(delta))
            if safe:
                yield StreamEvent("delta", {"text": safe})
        tail = stream.feed(cites.flush()) + stream.flush()
        if tail:
            yield StreamEvent("delta", {"text": tail})
        yield StreamEvent(
            "done", {"request_id": request_id, "mode": self.generator.mode, "model": self.generator.model}
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

    def feed(self, delta: str) -> str:
        self._pending += delta
        idx = self._pending.rfind("[")
        if idx != -1 and "]" not in self._pending[idx:] and len(self._pending) - idx <= 8:
            ready, self._pending = self._pending[:idx], self._pending[idx:]
        else:
            ready, self._pending = self._pending, ""
        return drop_invented_citations(ready, self._n)

    def flush(self) -> str:
        ready, self._pending = self._pending, ""
        return drop_invented_citations(ready, self._n)
