"""How often an evaluation is tried when the infrastructure, not the candidate, fails it.

One policy for every evaluator transport and the run loop: a request is tried at most
``max_attempts`` times in total, however the tries are split between a transport that retries on
its own (Ray's bridge re-dispatches to another device; a queue request goes back to the folder when
its worker dies) and the run loop, which submits again after an ``EvaluatorError``. A transport
tells how many tries it already spent through ``attempts_of(error)``; the run loop only tries what
is left. A verdict is never retried.

Standard library only: Ray's bridge and the queue worker import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

MAX_ATTEMPTS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class EvalRetryPolicy:
    """At most ``max_attempts`` tries of one request, ``backoff_s * 2**(n-1)`` seconds (capped at
    ``max_backoff_s``) before the (n+1)-th when the run loop is the one retrying."""

    max_attempts: int = MAX_ATTEMPTS
    backoff_s: float = 2.0
    max_backoff_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("a retry policy needs max_attempts >= 1")

    def may_retry(self, attempts_made: int) -> bool:
        """Whether another try is allowed after ``attempts_made`` failed ones."""
        return attempts_made < self.max_attempts

    def delay_s(self, attempts_made: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * 2 ** max(0, attempts_made - 1))

    def call(self, attempt: Callable[[], T], *, retry_on: type[BaseException] | tuple[type[BaseException], ...],
             give_up: Callable[[], bool] = lambda: False, sleep: Callable[[float], Any] = time.sleep) -> T:
        """``attempt()`` until it returns, trying at most what the policy leaves: each ``retry_on``
        error counts the tries it says it spent (``attempts_of``); the last one, or any error once
        ``give_up()`` is true, is raised."""
        tried = 0
        while True:
            try:
                return attempt()
            except retry_on as exc:
                tried += attempts_of(exc)
                if give_up() or not self.may_retry(tried):
                    raise
                sleep(self.delay_s(tried))

    def to_dict(self) -> dict[str, Any]:
        return {"max_attempts": self.max_attempts, "backoff_s": self.backoff_s, "max_backoff_s": self.max_backoff_s}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EvalRetryPolicy:
        data = data or {}
        return cls(**{k: data[k] for k in ("max_attempts", "backoff_s", "max_backoff_s") if data.get(k) is not None})


DEFAULT = EvalRetryPolicy()


def attempts_of(error: BaseException) -> int:
    """How many tries a transport spent before raising ``error`` (1 when it does not say)."""
    attempts = getattr(error, "attempts", None)
    return attempts if isinstance(attempts, int) and attempts >= 1 else 1
