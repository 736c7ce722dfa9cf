"""The verdict on the checked calls of ``check_plan``, with a reason that says what was observed.

The reference process replays the same call sequence (the first set twice on one copy, then every
other set, then the first set on a fresh copy), so a stateful reference is matched call for call.
When the candidate fails, the reason names the pattern, with the measured differences:

- wrong on the first call: the plain comparison (``allclose``, ``shape``, ...);
- right on call 1, wrong on call 2 with the same input (``state_across_calls``);
- right on the public input set(s), wrong on a hidden one (``hidden_input``);
- right on the first instance, wrong on a second, built under the next weight seed (``state_across_instances``);
- the same output for every input set (``constant_output``, from ``compare``).

torch only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pike_harness.worker.check_plan import PlannedCall
from pike_harness.worker.records import INCORRECT
from pike_harness.worker.supervise.compare import Comparison, compare_outputs


def _max_abs(comparison: Comparison) -> float:
    return max((check.max_abs_diff or 0.0 for check in comparison.checks), default=0.0)


def judge(candidate: Sequence[Sequence[torch.Tensor]], reference: Sequence[Sequence[torch.Tensor]],
          plan: Sequence[PlannedCall], labels: Sequence[str], *, atol: float, rtol: float,
          warmed: bool = False) -> Comparison:
    """Compare every planned call; ``checks`` of the result cover the first sight of each set only.

    ``warmed``: a warm-up call ran on a throwaway instance before the check, so the checked instance
    was already the second one built in the process (a failure on call 1 may be state shared between
    instances, and the reason says so).
    """
    first = [index for index, call in enumerate(plan) if call.first_sight]
    measured: dict = {}  # each (candidate, reference) tensor pair is measured once, on the device
    result = compare_outputs([candidate[i] for i in first], [reference[i] for i in first], atol=atol, rtol=rtol,
                             set_labels=[labels[plan[i].set_index] for i in first],
                             set_indexes=[plan[i].set_index for i in first], measured=measured)
    singles = [compare_outputs([candidate[i]], [reference[i]], atol=atol, rtol=rtol,
                               set_labels=[labels[call.set_index]], set_indexes=[call.set_index], measured=measured)
               for i, call in enumerate(plan)]
    call_one = singles[0]
    if call_one.category is not None:  # wrong on the very first checked call: the plain comparison says how
        if warmed and result.reason is not None:
            result.reason += ("; a warm-up call on a throwaway instance ran first, so this was the second "
                              "instance built in the process")
        return result
    by_set = {call.set_index: singles[i] for i, call in enumerate(plan) if call.first_sight}
    repeat = next((i for i, call in enumerate(plan) if call.repeat), None)
    if repeat is not None and singles[repeat].category is not None:
        _explain(result, singles[repeat], "state_across_calls",
                 "right on call 1, wrong on call 2 with the same input (state kept across calls)",
                 f"max abs diff {_max_abs(call_one):.3g} on call 1")
        return result
    n_public = sum(1 for label in labels if not label.startswith("hidden"))
    wrong = [index for index, single in by_set.items() if single.category is not None]
    if wrong and all(index >= n_public for index in wrong):
        publics = [by_set[index] for index in range(n_public)]
        _explain(result, by_set[wrong[0]], "hidden_input",
                 f"right on the public input set{'s' if n_public > 1 else ''}, wrong on "
                 f"{len(wrong)} of {len(by_set) - n_public} hidden one{'s' if len(by_set) - n_public > 1 else ''}",
                 f"max abs diff {max(_max_abs(c) for c in publics):.3g} on the public set{'s' if n_public > 1 else ''}")
        return result
    if result.category is not None:
        return result
    second = next((i for i, call in enumerate(plan) if call.instance == 1), None)
    if second is not None and singles[second].category is not None:
        _explain(result, singles[second], "state_across_instances",
                 "right on the first instance, wrong on a second built in the same process under the next weight "
                 "seed (state shared between instances, or code that holds only for the first one's weights)",
                 f"max abs diff {_max_abs(call_one):.3g} on the first instance")
    return result


def _explain(result: Comparison, failed: Comparison, check: str, pattern: str, baseline: str) -> None:
    """Replace the result's verdict with ``pattern`` plus what the failing call measured."""
    assert failed.reason is not None and failed.category is not None
    result.category = result.check = result.reason = None
    result.fail(failed.category, check if failed.category == INCORRECT else str(failed.check),
                f"{pattern}: {failed.reason}; {baseline}")
