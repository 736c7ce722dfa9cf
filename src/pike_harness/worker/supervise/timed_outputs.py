"""The verdict on the timed calls' outputs that the candidate's process drew (``timing.TimedSamples``),
reached in the reference process.

Each timed call's output is also compared in the candidate's own process, right after the call
(``TimedLoop._validate``), but with torch operators that run there: a candidate can register a kernel
over ``aten::isclose`` (``torch.library``) that answers "close" for anything, then skip its work in the
timed calls only. A random timed call per input set, drawn after it returned, is therefore compared
here too, against the reference's output for that set (the same one its checked call was compared
with), by the rules of the check (``compare``).

The loops also call the model on a few input sets the candidate's process was never shown
(``timing.FreshCalls``); a few of those calls' outputs, drawn likewise, are compared here with the
reference's output for the same set: an answer right only on inputs seen in the check is wrong there
(``incorrect/fresh_input``). torch only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pike_harness.worker.check_plan import PlannedCall
from pike_harness.worker.records import INCORRECT, REJECTED
from pike_harness.worker.supervise.compare import Comparison, compare_outputs

CHECK = "timed_output_mismatch"
FRESH_CHECK = "fresh_input"
FRESH_LABEL = "fresh seed"


def sampled_sets(sets: object, n_sets: int) -> list[int] | None:
    """The set numbers of a ``sampled`` reply, when they are distinct whole numbers below ``n_sets``
    (in increasing order, as the child writes them); None otherwise (the candidate wrote the reply)."""
    if not isinstance(sets, list) or len(sets) > n_sets:
        return None
    if not all(type(index) is int and 0 <= index < n_sets for index in sets):
        return None
    return sets if sets == sorted(set(sets)) else None


def first_sights(plan: Sequence[PlannedCall]) -> dict[int, int]:
    """Set number -> the position in ``plan`` of the call that gave that set's validated output."""
    return {call.set_index: position for position, call in enumerate(plan) if call.first_sight}


def judge(candidate: Sequence[Sequence[torch.Tensor]], reference: Sequence[Sequence[torch.Tensor]],
          sets: Sequence[int], labels: Sequence[str], *, atol: float, rtol: float,
          fresh_reference: Sequence[Sequence[torch.Tensor]] = ()) -> Comparison:
    """Compare each drawn timed call's outputs (``candidate[i]``, of set ``sets[i]``) with the reference's
    for that set, then each drawn fresh call's (the entries after those) with ``fresh_reference``; the
    first that fails decides, in words that say what it measured."""
    seen, fresh = candidate[:len(sets)], candidate[len(sets):]
    for got, want, index in zip(seen, reference, sets, strict=True):
        single = compare_outputs([got], [want], atol=atol, rtol=rtol, set_labels=[labels[index]],
                                 set_indexes=[index])
        if single.category is not None:
            result = Comparison(checks=single.checks)
            result.fail(REJECTED, CHECK,
                        f"a timed call drawn at random, compared in the reference process, is wrong where its "
                        f"checked call was right ({single.reason}): work skipped in the timed calls while the "
                        "comparison in the candidate's process was answered")
            return result
    for got, want in zip(fresh, fresh_reference, strict=True):
        single = compare_outputs([got], [want], atol=atol, rtol=rtol, set_labels=[FRESH_LABEL], set_indexes=[0])
        if single.category is not None:
            result = Comparison(checks=single.checks)
            result.fail(INCORRECT, FRESH_CHECK,
                        f"a call on an input set the check never showed, drawn at random among such calls inside "
                        f"the timed loops, is wrong ({single.reason}): answers right only on the inputs it had seen")
            return result
    return Comparison()
