"""Concurrent query embeds go through the model together: the calls that arrive while it is busy share its next pass.

A pass has a fixed cost whatever it holds (the model's layers run once per pass, not per text), so a lone
question costs about twice its share of a pass of eight (docs/benchmarks.md). A question on an idle
service starts at once; under load, the questions that queued behind a pass make up the next one, so
batching adds no wait of its own. A call's texts are never split between passes.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Vectors = list[list[float]]


@dataclass
class _Queue:
    """The calls waiting on one event loop, and the task that drains them."""

    waiting: deque[tuple[list[str], asyncio.Future[Vectors]]] = field(default_factory=deque)
    drain: asyncio.Task[None] | None = None


class Coalescer:
    def __init__(self, embed: Callable[[list[str]], Vectors], max_texts: int) -> None:
        self._embed = embed  # blocking: it runs on a worker thread
        self._max_texts = max_texts
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()

    async def __call__(self, texts: Sequence[str]) -> Vectors:
        loop = asyncio.get_running_loop()
        queue = self._queues.setdefault(loop, _Queue())
        future: asyncio.Future[Vectors] = loop.create_future()
        queue.waiting.append((list(texts), future))
        if queue.drain is None:
            queue.drain = loop.create_task(self._drain(queue))
        return await future

    def _next_pass(self, queue: _Queue) -> list[tuple[list[str], asyncio.Future[Vectors]]]:
        """The oldest calls whose texts fit in one pass (always at least one call), callers that gave up left out."""
        taken: list[tuple[list[str], asyncio.Future[Vectors]]] = []
        size = 0
        while queue.waiting and (not taken or size + len(queue.waiting[0][0]) <= self._max_texts):
            texts, future = queue.waiting.popleft()
            if not future.done():
                taken.append((texts, future))
                size += len(texts)
        return taken

    async def _drain(self, queue: _Queue) -> None:
        calls: list[tuple[list[str], asyncio.Future[Vectors]]] = []
        try:
            while queue.waiting:
                calls = self._next_pass(queue)
                if not calls:
                    continue
                try:
                    vectors = await asyncio.to_thread(self._embed, [t for texts, _ in calls for t in texts])
                except Exception as exc:  # each caller gets the embedder's own error
                    for _, future in calls:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                start = 0
                for texts, future in calls:
                    if not future.done():
                        future.set_result(vectors[start : start + len(texts)])
                    start += len(texts)
        finally:
            queue.drain = None
            # Left only when the drain itself was cancelled (its loop is closing): no caller waits forever.
            for _, future in [*calls, *queue.waiting]:
                future.cancel()
            queue.waiting.clear()
