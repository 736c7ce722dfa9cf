"""Samples, rounds and error-fixing rounds: bookkeeping every PIKE-style strategy shares.

Part of the host's public API (strategies import it as ``pike_harness.kit.rounds`` or through
``pike_harness.api``) so PIKE-B, best-of-n, refine, PIKE-O and third-party strategies fix failures the
same way.

A round is a batch of queries that starts only while the task has budget left. An optimize round then
issues all of its queries (the host allows the overshoot); a fix round does not: each fix query is sent
only while the task's count is below its budget, as PIKE refuses each fix query on its own, so fixes
never run past the budget. Results are read back in slot order, never completion order, so a replayed
run (resume) makes the same decisions from the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pike_harness.contracts.llm import FIX
from pike_harness.contracts.model import Attempt
from pike_harness.contracts.strategy import TaskContext
from pike_harness.errors import BudgetExhausted
from pike_harness.kit import prompt_templates
from pike_harness.kit.prompt_pack import PromptPack


@dataclass
class Sample:
    """One slot of a phase: the first attempt and the fixes that followed it (a lineage)."""

    slot: int
    branch: int
    key: str
    meta: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def latest(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def needs_fix(self) -> bool:
        """Errors and wrong outputs go to the error-fixing agent; a query that produced no program
        (the LLM failed for good) leaves nothing to fix."""
        latest = self.latest
        return latest is not None and latest.failed and latest.code is not None and latest.result is not None


@dataclass
class Order:
    """One query of a round, ready to submit."""

    sample: Sample
    role: str
    key: str
    messages: list[dict[str, str]]
    parent: str | None
    meta: dict[str, Any]


def run_round(ctx: TaskContext, orders: list[Order], *, overshoot: bool = True) -> bool:
    """Submit every order, then record the attempts in order. False when a query was refused (the
    budget is spent): the caller then ends the task after this round's answers are in.

    ``overshoot=False`` (fix rounds) sends each query only while the budget is not exhausted, so the
    round stops at exactly the budget; otherwise the round issues every query it started with.
    """
    submitted = []
    refused = False
    for order in orders:
        if not overshoot and ctx.budget.exhausted:
            refused = True
            break
        try:
            future = ctx.submit_attempt(order.role, order.messages, key=order.key, parent=order.parent,
                                        meta=order.meta)
        except BudgetExhausted:
            refused = True
            break
        submitted.append((order, future))
    for order, future in submitted:
        order.sample.attempts.append(future.result())
    return not refused


def fix_rounds(ctx: TaskContext, samples: list[Sample], *, max_rounds: int, tail_chars: int,
               context: str = "pike", pack: PromptPack | None = None) -> bool:
    """Up to ``max_rounds`` rounds in which every failing sample gets exactly one fix query.

    ``context`` picks the error-fixing prompt (``prompt_templates.fix_messages``: PIKE's two, or ``rich``).
    A round with nothing to fix ends early. Each fix query is sent only below the budget (samples in
    slot order), so fixes never overshoot. Returns False when the budget stopped the rounds.
    """
    for number in range(1, max_rounds + 1):
        failing = [s for s in samples if s.needs_fix]
        if not failing:
            return True
        if ctx.budget.exhausted:
            return False
        ctx.set_status(note=f"fix round {number}")
        orders = []
        for sample in failing:
            latest = sample.latest
            assert latest is not None and latest.code is not None and latest.result is not None
            messages = prompt_templates.fix_messages(ctx.task, latest.code, latest.result, tail_chars=tail_chars,
                                                     context=context, pack=pack)
            orders.append(Order(sample, FIX, f"{sample.key}/fix{number}", messages, latest.key,
                                {**sample.meta, "fix": number}))
        if not run_round(ctx, orders, overshoot=False):
            return False
    return True
