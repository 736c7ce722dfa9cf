"""When LLM failures stop the run: an endpoint that refuses the request itself, or many failed queries
in a row (a dead endpoint, not bad luck), rather than spending the budget on a failing endpoint."""

from __future__ import annotations

import threading
from collections.abc import Callable

# The endpoint refused the request itself (bad key, no permission, unknown model or endpoint, a request
# it will never accept): asking again cannot help, so the run stops at once and charges nothing.
FATAL_LLM_STATUSES = frozenset({400, 401, 403, 404})


class LLMHealth:
    """Counts failed queries in a row; ``fail`` stops the run once ``limit`` is reached (0: never)."""

    def __init__(self, limit: int, fail: Callable[[str], None]):
        self.limit = limit
        self._fail = fail
        self._streak = 0
        self._lock = threading.Lock()

    def answered(self) -> None:
        with self._lock:
            self._streak = 0

    def failed(self, error: str) -> None:
        """A query failed after its retries."""
        with self._lock:
            self._streak += 1
            streak = self._streak
        if self.limit and streak >= self.limit:
            self._fail(f"{streak} LLM queries in a row failed (last: {error}); the run stopped rather than spend "
                       "its budget on a failing endpoint; rerun the same command with --retry-llm-errors to ask "
                       "the failed queries again")
