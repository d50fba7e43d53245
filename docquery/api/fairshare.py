"""Per-principal share of the LLM's in-flight calls, so one caller cannot starve the others.

The LLM client refuses calls beyond ``llm.max_concurrency`` (503). Without a
share, one principal within its rate limit could hold every slot and every
other caller would get 503. Here a principal may hold at most
``api.llm_share`` of the slots (at least one); past that, that principal alone
gets 503 with Retry-After while the remaining slots serve the others.
"""

from __future__ import annotations

import math
import threading

from docquery.api.errors import ApiError


class LlmShare:
    def __init__(self, slots: int, share: float) -> None:
        self.per_principal = max(1, math.floor(slots * share))
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, principal_id: str) -> None:
        """Take a slot for ``principal_id`` or raise the 503; pair with :meth:`release`."""
        with self._lock:
            held = self._held.get(principal_id, 0)
            if held >= self.per_principal:
                raise ApiError(
                    503,
                    "too many answers in progress for this caller; retry later",
                    type_="overloaded",
                    headers={"Retry-After": "1"},
                )
            self._held[principal_id] = held + 1

    def release(self, principal_id: str) -> None:
        with self._lock:
            held = self._held.get(principal_id, 0) - 1
            if held > 0:
                self._held[principal_id] = held
            else:
                self._held.pop(principal_id, None)  # bounded: only principals with calls in flight

    def held(self, principal_id: str) -> int:
        return self._held.get(principal_id, 0)
