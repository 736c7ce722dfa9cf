"""The budget ledger on a resume: journaled queries keep their indices, and a new query is charged
against every counted query of the journal, whatever order the strategy asks them in this time. And the
money budget: a query's worst case is reserved before it is sent, so answers in flight cannot pass it."""

from __future__ import annotations

import threading
import time

import pytest

from pike_harness.contracts.llm import LLMResponse, Usage
from pike_harness.errors import BudgetExhausted
from pike_harness.host.budget_ledger import BudgetLedger
from pike_harness.host.run_signals import RunInterrupted


def test_a_new_query_asked_before_the_replayed_ones_cannot_pass_the_budget():
    # PIKE-O after a SIGKILL: four iterations journaled; this time it0001's fix comes before it0002.
    ledger = BudgetLedger(4, None)
    ledger.seed({"it0000": 1, "it0001": 2, "it0002": 3, "it0003": 4})
    assert ledger.charge(True, "it0000") == 1 and ledger.charge(True, "it0001") == 2
    with pytest.raises(BudgetExhausted):
        ledger.charge(True, "it0001/fix1")
    assert [ledger.charge(True, "it0002"), ledger.charge(True, "it0003")] == [3, 4]
    assert ledger.view().queries_used == 4


def test_new_queries_take_the_free_indices_and_a_fresh_run_counts_up():
    ledger = BudgetLedger(4, None)
    ledger.seed({"a": 1, "c": 3})  # b's failure was forgotten (--retry-llm-errors): its index is free
    assert [ledger.charge(True, "b"), ledger.charge(True, "a"), ledger.charge(True, "d")] == [2, 1, 4]
    with pytest.raises(BudgetExhausted):
        ledger.charge(True, "e")
    assert ledger.charge(False, "uncounted") is None
    fresh = BudgetLedger(2, None, overshoot=1)
    assert [fresh.charge(True, k) for k in ("x", "y", "z")] == [1, 2, 3]
    with pytest.raises(BudgetExhausted):
        fresh.charge(True, "w")


# -- the money budget: worst cases reserved before a query is sent ----------------------------------


def _answer(cost: float | None) -> LLMResponse:
    return LLMResponse(text="ok", usage=Usage(prompt_tokens=1, output_tokens=1), latency_s=0.0, provider="openai",
                       model="fake-coder", cost_usd=cost)


def _until(predicate, what: str) -> None:
    """Wait for a state another thread reaches (no sleep decides the outcome; the deadline only ends a hang)."""
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_query_is_refused_when_its_worst_case_would_pass_the_budget():
    ledger = BudgetLedger(100, 2.9)
    first = ledger.charge_query(True, "a", worst_case_usd=1.0)
    ledger.settle(first[1], _answer(0.4))
    second = ledger.charge_query(True, "b", worst_case_usd=1.0)
    ledger.settle(second[1], _answer(0.4))
    assert ledger.view().money_spent_usd == pytest.approx(0.8) and ledger.reserved_usd == 0
    with pytest.raises(BudgetExhausted, match=r"\$2\.90 .*could cost up to \$2\.50"):
        ledger.charge_query(True, "c", worst_case_usd=2.5)  # 0.8 + 2.5 > 2.9, and nothing is outstanding
    view = ledger.view()
    assert view.exhausted and view.money_spent_usd < view.money_limit_usd and view.queries_used == 2
    with pytest.raises(BudgetExhausted):  # once refused, the task's money budget is spent, even for a cheap one
        ledger.charge_query(True, "d", worst_case_usd=0.01)
    assert ledger.charge_query(True, "e", journaled=True)[1] is None  # a journaled answer costs nothing new


def test_a_charge_waits_for_the_answers_in_flight_rather_than_refuse():
    ledger = BudgetLedger(100, 2.9)
    held = [ledger.charge_query(True, k, worst_case_usd=1.0)[1] for k in ("a", "b")]
    assert ledger.reserved_usd == 2.0
    got: list = []
    thread = threading.Thread(target=lambda: got.append(ledger.charge_query(True, "c", worst_case_usd=1.0)),
                              daemon=True)
    thread.start()
    _until(lambda: ledger.waiting == 1, "c waits: 2.0 reserved + 1.0 > 2.9")
    ledger.settle(held[0], _answer(0.4))  # 0.4 + 1.0 reserved + 1.0 = 2.4: c fits now
    thread.join(60)
    assert not thread.is_alive() and got[0][0] == 3 and ledger.reserved_usd == 2.0
    ledger.settle(held[1], _answer(0.4))
    ledger.settle(got[0][1], _answer(0.4))
    ledger.settle(got[0][1], _answer(0.4))  # settled already: not counted twice
    assert ledger.view().money_spent_usd == pytest.approx(1.2) and ledger.reserved_usd == 0
    # The rule does not depend on timing: a query goes out exactly when the answers charged before it
    # plus its worst case fit. 1.2 + 1.0, 1.6 + 1.0 and 2.0 + 1.0 > 2.9: two more, then refused.
    for key in ("d", "e"):
        ledger.settle(ledger.charge_query(True, key, worst_case_usd=1.0)[1], _answer(0.4))
    with pytest.raises(BudgetExhausted):
        ledger.charge_query(True, "f", worst_case_usd=1.0)
    assert ledger.view().money_spent_usd == pytest.approx(2.0) and ledger.view().queries_used == 5


def test_an_unanswered_query_gives_its_reservation_back_and_a_stop_ends_a_wait():
    stopping = threading.Event()

    def check_running() -> None:
        if stopping.is_set():
            raise RunInterrupted()

    ledger = BudgetLedger(100, 1.5, check_running=check_running)
    _, failed = ledger.charge_query(True, "a", worst_case_usd=1.0)
    ledger.settle(failed)  # its llm_error is journaled (or it was never sent): nothing spent
    assert ledger.reserved_usd == 0 and ledger.view().money_spent_usd == 0
    _, held = ledger.charge_query(True, "b", worst_case_usd=1.0)
    raised: list = []

    def waiter() -> None:
        try:
            ledger.charge_query(True, "c", worst_case_usd=1.0)
        except RunInterrupted as exc:
            raised.append(exc)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    _until(lambda: ledger.waiting == 1, "c waits for b")
    stopping.set()
    thread.join(60)
    assert raised and held is not None and ledger.reserved_usd == 1.0


def test_journaled_answers_not_asked_again_yet_count_against_the_money():
    # A resume: the journal holds a's and b's answers ($1 each). A new query asked before b is replayed
    # is charged against both, as it was in the process that asked them first.
    ledger = BudgetLedger(100, 2.5)
    ledger.seed({"a": 1, "b": 2}, {"a": 1.0, "b": 1.0})
    assert ledger.charge_query(True, "a", journaled=True) == (1, None)
    ledger.add_cost(_answer(1.0), "a")
    with pytest.raises(BudgetExhausted):
        ledger.charge_query(True, "new", worst_case_usd=0.6)  # 1.0 spent + 1.0 unreplayed + 0.6 > 2.5


def test_a_query_without_a_price_is_checked_against_the_recorded_spend_as_before():
    ledger = BudgetLedger(100, 1.0)
    index, reservation = ledger.charge_query(True, "a")
    assert (index, reservation) == (1, None)
    ledger.add_cost(_answer(0.6))
    ledger.charge_query(True, "b")  # 0.6 < 1.0
    ledger.add_cost(_answer(0.6))
    with pytest.raises(BudgetExhausted, match=r"money budget \$1\.00 spent"):
        ledger.charge_query(True, "c")
    assert BudgetLedger(100, None).charge_query(True, "x", worst_case_usd=99.0) == (1, None)  # no money budget
