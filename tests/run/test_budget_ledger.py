"""The budget ledger on a resume: journaled queries keep their indices, and a new query is charged
against every counted query of the journal, whatever order the strategy asks them in this time."""

from __future__ import annotations

import pytest

from pike_harness.errors import BudgetExhausted
from pike_harness.host.budget_ledger import BudgetLedger


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
