"""The order of the checked calls, known to both the candidate's process and the supervisor.

PIKE checks one call on one instance with one input. Stateful candidates (a buffer reused across
calls, a CUDA graph captured once, state kept at class level) pass that and fail in use. The check
therefore calls the first input set twice in a row on the instance that is later timed, then every
other set once (the hidden ones last), then builds a second instance in the same process and calls
the first set on it. The second instance is built under another weight seed (``instance_weight_seed``):
weights packed once at class level and reused by every instance (a cache keyed on nothing) then give
it the first instance's weights, which its reference, built from its own seed, does not have. Each call is compared with the reference's output for the same call sequence,
so the verdict can say which of those it was. The supervisor computes the plan itself: the layout of
the candidate's outputs file never comes from the candidate. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedCall:
    instance: int  # 0: the instance that is timed; 1: a second instance built after instance 0's calls
    set_index: int  # index into public seeds + hidden seeds
    repeat: bool = False  # the same input again, on the same instance, right after its first call

    @property
    def first_sight(self) -> bool:
        """The call that gives this set's validated output (used by timing and the constant check)."""
        return self.instance == 0 and not self.repeat


def instance_weight_seed(weight_seed: int, instance: int) -> int:
    """The seed instance ``instance`` is built under: the request's weight seed for the instance that is
    checked and timed (PIKE's seed), the next one for the second instance. With one seed for both, the
    second instance's weights equal the first's, so state shared between instances that holds weights
    (packed, folded, cast once per class) would pass as correct."""
    return weight_seed + instance


def check_plan(n_sets: int, baseline_mode: str | None = None) -> list[PlannedCall]:
    """The calls for ``n_sets`` input sets. A compiled baseline mode (``pikeh baselines``) skips the
    second instance: it would pay the whole compilation again to test the task's own model."""
    calls = [PlannedCall(0, 0), PlannedCall(0, 0, repeat=True)]
    calls += [PlannedCall(0, index) for index in range(1, n_sets)]
    if baseline_mode in (None, "", "eager"):
        calls.append(PlannedCall(1, 0))
    return calls
