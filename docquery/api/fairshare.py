"""The LLM's in-flight calls shared fairly between tenants, and never refused while a slot is idle.

``llm.max_concurrency`` slots are shared. A request takes one before its first LLM call and gives it
back after its last. While a slot is free, any tenant takes it at once, however many it holds already
(work-conserving: one key serving 32 users gets 32 slots of 64). When every slot is busy the request
waits, in a short queue (``api.llm_queue`` places) for at most ``api.llm_queue_wait_s``, then gets 503
with Retry-After. A freed slot goes to the waiting tenant that holds the fewest, tenants under their
share (``api.llm_share`` of the slots, at least one) first: a tenant borrows idle slots, and is held to
its share only when another tenant is waiting, as Kubernetes' API Priority and Fairness borrows. A
tenant's waiter under its share evicts (503) the newest waiter of the richest tenant when the queue is
full, so a flood cannot fill the queue against the others.

A tenant is not a credential: N keys of one tenant are one tenant (:func:`tenant_of`).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
from dataclasses import dataclass, field

from docquery.api.errors import ApiError
from docquery.core.domain import Principal


def tenant_of(principal: Principal) -> str:
    """The caller's tenant: the one its credential names (API key ``tenant``, ``auth.jwt_tenant_claim``), else
    its set of groups; callers with the same groups read the same documents, so they are one party."""
    if principal.tenant:
        return "tenant:" + principal.tenant
    return "groups:" + "\x1f".join(sorted(principal.groups))


@dataclass(eq=False)
class _Waiter:
    tenant: str
    seq: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool]
    granted: bool = False
    evicted: bool = False


@dataclass
class _State:
    held: dict[str, int] = field(default_factory=dict)
    total: int = 0
    queue: list[_Waiter] = field(default_factory=list)


class LlmShare:
    def __init__(self, slots: int, share: float, *, queue: int = 64, wait_s: float = 2.0) -> None:
        self.slots = slots
        self.per_tenant = max(1, math.floor(slots * share))
        self.queue_size = queue
        self.wait_s = wait_s
        self._s = _State()
        self._seq = itertools.count()
        self._lock = threading.Lock()  # routes run on the event loop; cleanups may run elsewhere

    def held(self, tenant: str) -> int:
        return self._s.held.get(tenant, 0)

    def waiting(self) -> int:
        return len(self._s.queue)

    def _refused(self, why: str) -> ApiError:
        retry = str(max(1, math.ceil(self.wait_s)))
        return ApiError(503, why, type_="overloaded", headers={"Retry-After": retry})

    def _rank(self, w: _Waiter) -> tuple[bool, int, int]:
        held = self.held(w.tenant)
        return (held >= self.per_tenant, held, w.seq)

    def _take(self, tenant: str) -> None:
        self._s.held[tenant] = self.held(tenant) + 1
        self._s.total += 1

    def _dispatch(self) -> None:
        """Under the lock: give free slots to waiters, the poorest tenant first."""
        while self._s.total < self.slots and self._s.queue:
            best = min(self._s.queue, key=self._rank)
            self._s.queue.remove(best)
            self._take(best.tenant)
            best.granted = True
            _resolve(best, True)

    async def acquire(self, tenant: str) -> None:
        """Take a slot for ``tenant``, waiting within the queue's bounds, or raise the 503."""
        with self._lock:
            if self._s.total < self.slots and not self._s.queue:
                self._take(tenant)
                return
            loop = asyncio.get_running_loop()
            waiter = _Waiter(tenant, next(self._seq), loop, loop.create_future())
            if not self._enqueue(waiter):
                raise self._refused("too many answers in progress; retry later")
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), self.wait_s)
        except TimeoutError:
            if self._abandon(waiter):
                raise self._refused("no answer slot became free in time; retry later") from None
            return  # granted as the wait ended
        except asyncio.CancelledError:
            if not self._abandon(waiter):
                self.release(tenant)  # the client left just as its slot came
            raise
        if waiter.evicted:
            raise self._refused("too many answers in progress for this caller's tenant; retry later")

    def _abandon(self, waiter: _Waiter) -> bool:
        """Leave the queue; False when the slot was granted meanwhile (the caller holds it then)."""
        with self._lock:
            if waiter.granted:
                return False
            if waiter in self._s.queue:
                self._s.queue.remove(waiter)
            return True

    def _enqueue(self, waiter: _Waiter) -> bool:
        """Under the lock: queue ``waiter``, evicting a richer tenant's newest waiter when full."""
        if len(self._s.queue) < self.queue_size:
            self._s.queue.append(waiter)
            return True
        if not self._s.queue:
            return False
        worst = max(self._s.queue, key=self._rank)
        if self._rank(worst)[:2] <= self._rank(waiter)[:2]:
            return False
        self._s.queue.remove(worst)
        worst.evicted = True
        _resolve(worst, False)
        self._s.queue.append(waiter)
        return True

    def release(self, tenant: str) -> None:
        with self._lock:
            self._release_locked(tenant)

    def _release_locked(self, tenant: str) -> None:
        held = self.held(tenant) - 1
        if held > 0:
            self._s.held[tenant] = held
        else:
            self._s.held.pop(tenant, None)  # bounded: only tenants with calls in flight
        self._s.total -= 1
        self._dispatch()


def _resolve(waiter: _Waiter, value: bool) -> None:
    def settle() -> None:
        if not waiter.future.done():
            waiter.future.set_result(value)

    waiter.loop.call_soon_threadsafe(settle)
