"""The strategy plugin interface: search logic only.

A strategy decides what to ask the LLM and which programs to evaluate, one task at a time, through a
``TaskContext`` the host gives it. The host owns everything else: budgets (every counted query is
charged before it is sent), persistence (every response and result is journaled the moment it
completes), resume (a rerun replays the journal: a query whose key was answered before is not sent
again), concurrency (LLM and evaluator limits) and progress display. See docs/strategies.md.

Resume works by replay, so a strategy must be deterministic given the answers it receives: name every
query with a ``key`` that the same search would give it again (``"phase3/branch2/fix1"``), draw random
numbers only from ``ctx.rng``, and break ties by something stable (keys), never by completion order.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pike_harness.contracts.configurable import Configurable, EmptyConfig
from pike_harness.contracts.llm import GenerationParams, LLMResponse
from pike_harness.contracts.model import Attempt, EvalResult, Task


@dataclass
class BudgetView:
    """A task's budget as the strategy sees it. Queries are charged when issued."""

    query_limit: int
    queries_used: int
    money_limit_usd: float | None
    money_spent_usd: float

    @property
    def queries_left(self) -> int:
        return max(0, self.query_limit - self.queries_used)

    @property
    def exhausted(self) -> bool:
        """True once no new round of queries should start."""
        if self.queries_used >= self.query_limit:
            return True
        return self.money_limit_usd is not None and self.money_spent_usd >= self.money_limit_usd


class TaskContext(Protocol):
    """What a strategy can do for one task. Implemented by the host's run loop."""

    task: Task
    rng: random.Random  # seeded from the run seed and the task: use it for every random choice

    @property
    def budget(self) -> BudgetView: ...

    @property
    def baseline(self) -> EvalResult | None:
        """The reference's own evaluation on this run's evaluator (the eager baseline), when it ran.

        Strategies that seed their search with the reference (PIKE-O) use it instead of evaluating
        the reference again.
        """

    def ask(self, role: str, messages: list[dict[str, str]], *, key: str, counted: bool = True,
            params: GenerationParams | None = None) -> LLMResponse:
        """Send one query and return the answer (replayed from the journal on resume).

        Counted queries are charged to the task's query budget before they are sent; raises
        ``BudgetExhausted`` when the budget allows no more.
        """

    def submit_attempt(self, role: str, messages: list[dict[str, str]], *, key: str,
                       parent: str | None = None, meta: dict[str, Any] | None = None,
                       counted: bool = True, params: GenerationParams | None = None) -> Future[Attempt]:
        """Ask for a program, extract its code (first fenced block, else the whole reply), evaluate it,
        journal everything, and resolve to the ``Attempt``. Charging happens before this returns, so
        a strategy that submits a round of queries sees the budget move at once."""

    def attempt(self, role: str, messages: list[dict[str, str]], *, key: str, parent: str | None = None,
                meta: dict[str, Any] | None = None, counted: bool = True,
                params: GenerationParams | None = None) -> Attempt:
        """``submit_attempt(...).result()``."""

    def evaluate(self, code: str, *, key: str) -> EvalResult:
        """Evaluate a program that no query produced (a seed program); journaled and replayed too."""

    def set_status(self, **fields: Any) -> None:
        """Update the progress view (``phase=3``, ``note="fixing"``); purely informative."""

    def log(self, message: str) -> None:
        """A line in the run's log file and, when not on a terminal, on stderr."""


class Strategy(Configurable, ABC):
    """Subclass, set ``name``, ``description`` and ``Config``, implement ``run_task``, register it."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "strategy"
    description: ClassVar[str] = ""
    # A dataclass whose fields are the strategy's options (pike_harness.contracts.configurable describes the
    # mechanism strategies, evaluators and reporters share). Each field becomes a CLI option
    # (``--num-branches``) and a key in run.toml's [strategy] table; put help text in
    # ``field(metadata={"help": "..."})``.
    Config: ClassVar[type] = EmptyConfig
    roles: ClassVar[tuple[str, ...]] = ("optimize", "fix")

    def overshoot(self) -> int:
        """Queries a started round may use past the budget; 0 means the budget is a hard wall.

        How far past the query budget a round that has started may go (PIKE-B: num_branches - 1). The
        host refuses queries beyond query_budget + overshoot."""
        return 0

    @abstractmethod
    def run_task(self, ctx: TaskContext) -> None:
        """Search for faster programs for ``ctx.task`` until the budget is spent or the search ends."""

    def sampling(self) -> dict[str, Any]:
        """GenerationParams fields this strategy sets over the run's (``{"top_p": 0.95}``): sampling
        that belongs to the method, not to the model (PIKE-O sent top_p 0.95 and no top_k)."""
        return {}

    def example_prompts(self, task: Task) -> list[Any]:
        """Every prompt this strategy can send, built for ``task`` with stand-in programs
        (``pike_harness.kit.prompt_examples.PromptExample`` items), for ``pikeh prompts show`` and
        golden-prompt tests; empty when the strategy does not say."""
        return []


def require_at_least(config: Any, **minimums: int) -> None:
    """Check Config fields against lower bounds, naming the CLI option in the error.

    Call it from a Config's ``__post_init__``: ``require_at_least(self, num_branches=1, max_fix_attempts=0)``.
    """
    from pike_harness.errors import UserError

    for name, minimum in minimums.items():
        value = getattr(config, name)
        if value is None:
            continue
        # A --config file can give any TOML value: a float or a bool is as wrong as a small number.
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise UserError(f"--{name.replace('_', '-')} must be a whole number of at least {minimum} (got {value!r})")
