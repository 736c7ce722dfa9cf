"""How a run stops: Ctrl-C and SIGTERM (the first asks the run to stop, a second abandons the grace wait),
and ``RunInterrupted``, which carries the stop into strategy threads.

The handlers only count signals. Raising from a handler (Python's default for SIGINT) can land in the
middle of a journal write or while a lock is held, and a second Ctrl-C during the shutdown used to
escape as click's "Aborted!" with no ``run_end``. Instead the run loop polls ``requested`` and
``abandon`` and stops in order: every started evaluation gets its ``eval_abort``, answers already being
generated get a bounded wait, then ``run_end``.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """Counts SIGINT/SIGTERM while installed (main thread only; elsewhere it is inert)."""

    def __init__(self) -> None:
        self.count = 0
        self.last: str | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """The user (or a job scheduler) asked the run to stop."""
        return self.count >= 1

    @property
    def abandon(self) -> bool:
        """Asked twice: stop waiting for LLM answers now (the journal still closes properly)."""
        return self.count >= 2

    def _handle(self, signum: int, _frame: Any) -> None:
        self.count += 1
        self.last = signal.Signals(signum).name
        outer = self._previous.get(signum)
        if callable(outer) and isinstance(getattr(outer, "__self__", None), StopSignals):
            outer(signum, _frame)  # nested (a seed group around a run): it counts too

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
                outer = getattr(self._previous[signum], "__self__", None)
                if isinstance(outer, StopSignals) and outer.count > self.count:  # asked to stop before we began
                    self.count, self.last = outer.count, outer.last
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


class RunInterrupted(BaseException):
    """Raised inside strategy threads once the run is stopping (Ctrl-C, SIGTERM, a fatal error).

    A BaseException so a strategy's ``except Exception`` cannot swallow it.
    """
