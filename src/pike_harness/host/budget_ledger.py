"""What one task has spent against its budgets: queries are charged before they are sent, money as
answers arrive, so no query can be sent that the budget does not cover.

On a resume the journal's counted queries are known before the strategy asks anything (``seed``). A
query it asks again keeps the index it was journaled with; a new one is charged against every counted
query of the journal, not only those asked again so far. Why: a strategy whose order depends on when
evaluations end (PIKE-O's waves) may ask a new query before the recorded ones it used to ask first,
and counting only this process's charges let it past the budget, under an index already taken
(a SIGKILL-and-resume test caught ``[1, 2, 3, 3, 4]`` for a budget of 4)."""

from __future__ import annotations

import threading
from typing import Any

from pike_harness.contracts.llm import LLMResponse
from pike_harness.contracts.strategy import BudgetView
from pike_harness.errors import BudgetExhausted


class BudgetLedger:
    """One task's query count and spend; ``overshoot`` is the strategy's allowance past the budget."""

    def __init__(self, query_budget: int, money_budget: float | None, overshoot: int = 0):
        self.query_budget = query_budget
        self.money_budget = money_budget
        self.overshoot = overshoot
        self._lock = threading.Lock()
        self.queries_used = 0  # charged in this process, replayed ones included: what the strategy sees
        self.spent_usd = 0.0
        self.spend_known = True
        self._recorded: dict[str, int] = {}  # key -> index of a counted query the journal holds
        self._taken: set[int] = set()  # indices of the journal's counted queries and of new ones

    def seed(self, recorded: dict[str, int]) -> None:
        """The counted queries an earlier process journaled (key -> index), before anything is charged."""
        with self._lock:
            self._recorded = dict(recorded)
            self._taken = set(recorded.values())

    def view(self) -> BudgetView:
        with self._lock:
            return BudgetView(self.query_budget, self.queries_used, self.money_budget, self.spent_usd)

    def charge(self, counted: bool, key: str | None = None) -> int | None:
        """Charge one query (its 1-based index), or check only the money for an uncounted one. A
        ``key`` the journal holds as counted gets its recorded index; it was charged when first asked."""
        with self._lock:
            if self.money_budget is not None and self.spent_usd >= self.money_budget:
                raise BudgetExhausted(f"money budget ${self.money_budget:.2f} spent")
            if not counted:
                return None
            if key is not None and key in self._recorded:
                self.queries_used += 1
                return self._recorded[key]
            if len(self._taken) >= self.query_budget + self.overshoot:
                raise BudgetExhausted(f"query budget {self.query_budget} spent")
            index = next(i for i in range(1, len(self._taken) + 2) if i not in self._taken)
            self._taken.add(index)
            self.queries_used += 1
            return index

    def add_cost(self, response: LLMResponse) -> None:
        with self._lock:
            if response.cost_usd is None:
                self.spend_known = False
            else:
                self.spent_usd += response.cost_usd

    def restore(self, ended: dict[str, Any]) -> None:
        """What a task that ended in an earlier process had spent (its ``task_end`` event)."""
        with self._lock:
            self.queries_used = int(ended.get("queries_used") or 0)
            self.spent_usd = float(ended.get("spend_usd") or 0.0)
            self.spend_known = bool(ended.get("spend_known", True))
