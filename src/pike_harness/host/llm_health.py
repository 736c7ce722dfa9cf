"""When LLM failures stop the run: an endpoint that refuses the run's setup itself, or many failed
queries in a row (a dead endpoint, or a model that takes none of the prompts, not bad luck), rather than
spending the budget on a failing endpoint."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pike_harness.contracts.llm import LLMError, PromptRefusedError

# The endpoint refused the request itself (bad key, no permission, unknown model or endpoint, a parameter
# it will never accept): asking again cannot help, and neither can the next prompt, so the run stops at
# once and charges nothing. A 400 about one prompt's content (too long, refused content) is raised as
# PromptRefusedError instead (kit/prompt_refusals.py) and is that query's failure, not the run's.
FATAL_LLM_STATUSES = frozenset({400, 401, 403, 404})


def stops_the_run(exc: LLMError) -> bool:
    """Whether this failure is the run's setup being refused (fatal), not one query failing."""
    return not isinstance(exc, PromptRefusedError) and exc.status in FATAL_LLM_STATUSES


def setup_refused_message(exc: LLMError) -> str:
    """The one paragraph a user sees when the endpoint refuses the run's setup: the provider's own words
    (the backends quote them, keys redacted), what it cost, and what to do."""
    said = str(exc)
    if f"HTTP {exc.status}" not in said:
        said = f"HTTP {exc.status}: {said}"
    return (f"the LLM endpoint refused the run's requests ({said}); this is about the run's setup (the API "
            "key, the model, --llm-base-url or a generation option), not one prompt, so the run stopped at "
            "once; nothing was charged to the budget; fix it and rerun the same command to resume")


class LLMHealth:
    """Counts failed queries in a row; ``fail`` stops the run once ``limit`` is reached (0: never).

    A refused prompt counts too: one is that query's bad luck, but a streak of them means the model takes
    none of the run's prompts (a context window smaller than --max-tokens, say), and a run that goes on
    would spend its whole query budget on refusals.
    """

    def __init__(self, limit: int, fail: Callable[[str], None]):
        self.limit = limit
        self._fail = fail
        self._streak = 0
        self._refused = 0  # of the streak, the refused prompts
        self._lock = threading.Lock()

    def answered(self) -> None:
        with self._lock:
            self._streak = self._refused = 0

    def failed(self, error: str, *, refused: bool = False) -> None:
        """A query failed after its retries (``refused``: the provider refused its prompt)."""
        with self._lock:
            self._streak += 1
            self._refused += refused
            streak, all_refused = self._streak, self._refused == self._streak
        if not self.limit or streak < self.limit:
            return
        if all_refused:
            self._fail(f"the provider refused the prompts of {streak} LLM queries in a row (last: {error}); the "
                       "run stopped rather than spend its query budget on prompts the model will not take; start a new "
                       "run with a --max-tokens that fits the model's context window, or a model with a larger "
                       "one (a resume keeps refused queries failed: the same prompt gets the same refusal)")
        else:
            self._fail(f"{streak} LLM queries in a row failed (last: {error}); the run stopped rather than spend "
                       "its budget on a failing endpoint; rerun the same command with --retry-llm-errors to ask "
                       "the failed queries again")
