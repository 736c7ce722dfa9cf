"""Evaluations in flight, as the journal sees them: every ``eval_start`` gets exactly one end.

An evaluation's end is its verdict (``eval``; ``final_timing`` for a task's final re-timing) or an
``eval_abort``; a stopping run closes every
evaluation still running with an ``eval_abort`` and lets none start after that, so the journal a resume
reads is exact (see docs/run-layout.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pike_harness.contracts.journal import EvalAbort, EvalDone, EvalStart, FinalTiming
from pike_harness.host.run_signals import RunInterrupted
from pike_harness.host.store import RunStore


class OpenEvaluations:
    """The (task, key) pairs that wrote ``eval_start`` and await their end."""

    def __init__(self, store: RunStore, stopping: Callable[[], bool]):
        self.store = store
        self._stopping = stopping
        self._open: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._sealed = False

    def begin(self, task: str, key: str) -> None:
        """Journal eval_start, and remember it until its verdict or eval_abort is journaled."""
        with self._lock:
            if self._sealed or self._stopping():
                raise RunInterrupted()
            self._open.add((task, key))
            self.store.append(EvalStart(task=task, key=key))

    def end(self, event: EvalDone | EvalAbort | FinalTiming) -> bool:
        """Journal the evaluation's end, unless the stopping run already closed it; True if written."""
        with self._lock:
            if (event.task, event.key) not in self._open:
                return False
            self._open.discard((event.task, event.key))
            self.store.append(event)
            return True

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    def abort_all(self, why: str) -> int:
        """Close every evaluation still running with an eval_abort; none may start after this."""
        with self._lock:
            self._sealed = True
            for task, key in sorted(self._open):
                self.store.append(EvalAbort(task=task, key=key, why=why))
            count = len(self._open)
            self._open.clear()
            return count
