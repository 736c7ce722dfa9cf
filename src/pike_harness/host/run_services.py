"""What one task's ``TaskRun`` may use of the run around it: the whole interface, in one place.

The run loop (``run.Runner``) provides it; ``task_run.TaskRun`` depends only on this protocol, so the
two modules do not import each other and a reader sees exactly which parts of a run a task touches:
the store and the resume's replay (journal), the LLM client and its health, the evaluations still
open, the answers in flight, the live progress table, and four calls back into the loop.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol

from pike_harness.contracts.llm import GenerationParams
from pike_harness.contracts.model import Attempt, EvalResult, PairedSpec, Task

if TYPE_CHECKING:
    from pike_harness.host.answers_in_flight import AnswersInFlight
    from pike_harness.host.journal_reading import Replay
    from pike_harness.host.llm_health import LLMHealth
    from pike_harness.host.open_evaluations import OpenEvaluations
    from pike_harness.host.progress import RunProgress
    from pike_harness.host.run_config import RunConfig
    from pike_harness.host.store import RunStore


class RunServices(Protocol):
    """The run as one task sees it (``run.Runner`` implements it)."""

    config: RunConfig
    params: GenerationParams  # the run's generation parameters, the default of every query
    overshoot: int  # queries a strategy may issue past the budget in one step (its declaration)
    store: RunStore
    replay: Replay
    llm: Any  # the LLMClient
    llm_health: LLMHealth
    open_evals: OpenEvaluations
    answers: AnswersInFlight
    progress: RunProgress
    attempt_pool: Executor  # where attempts run, so a strategy's futures resolve out of order

    @property
    def stopping(self) -> bool: ...

    def check_running(self) -> None:
        """Raise ``RunInterrupted`` when the run is stopping."""

    def fail(self, message: str) -> None:
        """Stop the run for good with ``message`` (a refused key, too many failures)."""

    def run_evaluation(self, task: Task, code: str, *, paired: PairedSpec | None = None) -> EvalResult:
        """Evaluate ``code`` for ``task`` (the run's evaluator, its retries); ``paired``: also time it
        paired against the task's eager reference (the final re-timing)."""

    def attempt_finished(self, task_run: Any, attempt: Attempt) -> None:
        """An attempt has its verdict: the loop updates the task's best and the progress table."""
