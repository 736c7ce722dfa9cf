"""What one task has spent against its budgets: queries are charged before they are sent, money as
answers arrive, so no query can be sent that the budget does not cover."""

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
        self.queries_used = 0
        self.spent_usd = 0.0
        self.spend_known = True

    def view(self) -> BudgetView:
        with self._lock:
            return BudgetView(self.query_budget, self.queries_used, self.money_budget, self.spent_usd)

    def charge(self, counted: bool) -> int | None:
        """Charge one query (its 1-based index), or check only the money for an uncounted one."""
        with self._lock:
            if self.money_budget is not None and self.spent_usd >= self.money_budget:
                raise BudgetExhausted(f"money budget ${self.money_budget:.2f} spent")
            if not counted:
                return None
            if self.queries_used >= self.query_budget + self.overshoot:
                raise BudgetExhausted(f"query budget {self.query_budget} spent")
            self.queries_used += 1
            return self.queries_used

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
