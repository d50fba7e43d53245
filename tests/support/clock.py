"""A clock the test moves by hand: code under test takes ``clock=`` instead of reading time itself."""

from __future__ import annotations

import threading


class ManualClock:
    """Monotonic seconds that change only when the test calls :meth:`advance`. Thread-safe."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock never goes back")
        with self._lock:
            self._now += seconds
