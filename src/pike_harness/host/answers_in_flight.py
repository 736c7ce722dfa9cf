"""LLM answers being generated: a stopping run waits (bounded) to journal answers it has paid for."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class AnswersInFlight:
    """Counts LLM queries in flight and lets a stopping run wait for them."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._count = 0

    @property
    def count(self) -> int:
        with self._idle:
            return self._count

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Marks one LLM query in flight for the duration of the block."""
        with self._idle:
            self._count += 1
        try:
            yield
        finally:
            with self._idle:
                self._count -= 1
                self._idle.notify_all()

    def drain(self, grace_s: float, abandon: Callable[[], bool]) -> int:
        """Wait up to ``grace_s`` for them, unless ``abandon()`` turns true; returns how many are left."""
        deadline = time.monotonic() + grace_s
        with self._idle:
            while self._count and time.monotonic() < deadline and not abandon():
                self._idle.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            return self._count
