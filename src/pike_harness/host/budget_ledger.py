"""What one task has spent against its budgets: queries are charged before they are sent, and money is
reserved before they are sent, so no query can be sent that the budget does not cover.

The query budget: on a resume the journal's counted queries are known before the strategy asks anything
(``seed``). A query it asks again keeps the index it was journaled with; a new one is charged against
every counted query of the journal, not only those asked again so far. Why: a strategy whose order
depends on when evaluations end (PIKE-O's waves) may ask a new query before the recorded ones it used to
ask first, and counting only this process's charges let it past the budget, under an index already taken
(a SIGKILL-and-resume test caught ``[1, 2, 3, 3, 4]`` for a budget of 4).

The money budget: before a query is sent, its worst case (``LLMClient.worst_case_cost``: a bound on its
prompt's tokens at the input price plus its ``max_tokens`` at the output price) is reserved, and a query
is refused (``BudgetExhausted``, as a spent query budget is) when

    spent + unreplayed + reserved + worst_case > money_budget

``spent`` is the cost of the answers this process has journaled or replayed, ``unreplayed`` that of the
answers the journal holds that the strategy has not asked again yet (the same reason as the query count
above), ``reserved`` the worst cases of the queries sent and not answered yet. An answer (or a failure)
replaces its reservation by its cost. While other queries of the task are unanswered the charge waits
for them rather than refuse (their answers usually cost less than their reservations); it refuses once
none is left. So the rule a query meets does not depend on timing: it is sent exactly when the costs of
the answers charged before it, plus its own worst case, stay within the budget. Once one is refused the
money budget is spent for the task (``view().exhausted``): a task stops with less than one query's worst
case unspent. A query whose model has no price (worst case None) is checked as before reservations:
refused once the recorded spend reaches the budget. A query the journal answered costs nothing new and
is never refused for money.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pike_harness.contracts.llm import LLMResponse
from pike_harness.contracts.strategy import BudgetView
from pike_harness.errors import BudgetExhausted

WAIT_POLL_S = 0.2  # how often a charge waiting for answers looks at the run's stop request


@dataclass
class LedgerView(BudgetView):
    """The strategy's view, ``exhausted`` also once a query was refused for money (with spend still
    below the budget: the budget cannot cover another query's worst case)."""

    money_refused: bool = False

    @property
    def exhausted(self) -> bool:
        return self.money_refused or super().exhausted


@dataclass(frozen=True)
class Reservation:
    """One query's reserved worst case, until its answer or failure is journaled (``settle``)."""

    ticket: int
    usd: float


class BudgetLedger:
    """One task's query count and spend; ``overshoot`` is the strategy's allowance past the budget.
    ``check_running`` raises ``RunInterrupted`` when the run stops (a charge waiting for answers ends)."""

    def __init__(self, query_budget: int, money_budget: float | None, overshoot: int = 0, *,
                 check_running: Callable[[], None] | None = None):
        self.query_budget = query_budget
        self.money_budget = money_budget
        self.overshoot = overshoot
        self._check_running = check_running or (lambda: None)
        self._lock = threading.Condition()
        self.queries_used = 0  # charged in this process, replayed ones included: what the strategy sees
        self.spent_usd = 0.0
        self.spend_known = True
        self.money_refused = False
        self._recorded: dict[str, int] = {}  # key -> index of a counted query the journal holds
        self._taken: set[int] = set()  # indices of the journal's counted queries and of new ones
        self._unreplayed: dict[str, float] = {}  # key -> cost of a journaled answer not asked again yet
        self._reservations: dict[int, float] = {}  # ticket -> worst case of a query not answered yet
        self._tickets = itertools.count(1)
        self.waiting = 0  # charges waiting for answers to settle (tests look)

    def seed(self, recorded: dict[str, int], costs: dict[str, float] | None = None) -> None:
        """The counted queries an earlier process journaled (key -> index), and the costs of the answers
        it journaled (key -> dollars, counted or not), before anything is charged."""
        with self._lock:
            self._recorded = dict(recorded)
            self._taken = set(recorded.values())
            self._unreplayed = dict(costs or {})

    def view(self) -> LedgerView:
        with self._lock:
            return LedgerView(self.query_budget, self.queries_used, self.money_budget, self.spent_usd,
                              money_refused=self.money_refused)

    @property
    def reserved_usd(self) -> float:
        """The worst cases of the queries sent and not answered yet."""
        with self._lock:
            return sum(self._reservations.values())

    def charge(self, counted: bool, key: str | None = None) -> int | None:
        """Charge one query with no money reservation (its 1-based index, None when uncounted)."""
        return self.charge_query(counted, key)[0]

    def charge_query(self, counted: bool, key: str | None = None, *, worst_case_usd: float | None = None,
                     journaled: bool = False) -> tuple[int | None, Reservation | None]:
        """Charge one query: its 1-based index (None when uncounted) and its money reservation (None when
        there is no money budget, the query is ``journaled``, or its worst case is unknown). A ``key``
        the journal holds as counted gets its recorded index; it was charged when first asked. Raises
        ``BudgetExhausted`` when either budget refuses it (the module's docstring has the money rule)."""
        with self._lock:
            while True:
                recorded = key is not None and key in self._recorded
                if counted and not recorded and len(self._taken) >= self.query_budget + self.overshoot:
                    raise BudgetExhausted(f"query budget {self.query_budget} spent")
                if journaled or self.money_budget is None or self._money_fits(worst_case_usd):
                    break
                if not self._reservations:
                    self.money_refused = True
                    raise BudgetExhausted(self._money_message(worst_case_usd))
                self.waiting += 1
                try:
                    self._lock.wait(timeout=WAIT_POLL_S)  # an answer settles a reservation and notifies
                finally:
                    self.waiting -= 1
                self._check_running()
            reservation = None
            if not journaled and self.money_budget is not None and worst_case_usd is not None:
                reservation = Reservation(next(self._tickets), worst_case_usd)
                self._reservations[reservation.ticket] = worst_case_usd
            if not counted:
                return None, reservation
            if recorded:
                self.queries_used += 1
                return self._recorded[key], reservation  # type: ignore[index]
            index = next(i for i in range(1, len(self._taken) + 2) if i not in self._taken)
            self._taken.add(index)
            self.queries_used += 1
            return index, reservation

    def _money_fits(self, worst_case_usd: float | None) -> bool:
        if self.money_refused:
            return False
        assert self.money_budget is not None
        committed = self.spent_usd + sum(self._unreplayed.values()) + sum(self._reservations.values())
        if worst_case_usd is None:  # no price: only what is known to be spent
            return committed < self.money_budget
        return committed + worst_case_usd <= self.money_budget

    def _money_message(self, worst_case_usd: float | None) -> str:
        message = f"money budget ${self.money_budget:.2f} spent"
        if worst_case_usd is not None and self.spent_usd < (self.money_budget or 0.0):
            message += (f" (${self.spent_usd:.2f} recorded; the next query could cost up to "
                        f"${worst_case_usd:.2f})")
        return message

    def settle(self, reservation: Reservation | None, response: LLMResponse | None = None) -> None:
        """A query's answer (``response``) or failure (None) is journaled, or it was never sent: its
        reservation gives way to its cost. Settling a reservation again does nothing."""
        with self._lock:
            if reservation is not None and self._reservations.pop(reservation.ticket, None) is None:
                return  # settled already
            if response is not None:
                self._add(response)
            self._lock.notify_all()

    def add_cost(self, response: LLMResponse, key: str | None = None) -> None:
        """An answer's cost; ``key``: a journaled answer asked again (its cost is no longer unreplayed)."""
        with self._lock:
            if key is not None:
                self._unreplayed.pop(key, None)
            self._add(response)
            self._lock.notify_all()

    def _add(self, response: LLMResponse) -> None:
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
