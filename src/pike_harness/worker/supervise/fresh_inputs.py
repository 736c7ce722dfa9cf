"""The verdict on the fresh calls' times: is the candidate faster on inputs it has seen than on new ones?

The timed loop makes a few uncounted calls on input sets the candidate's process had never been
shown (``timing.FreshCalls``), at random places among its timed calls, by the same clock. An honest
model costs the same on any input of the task's shapes, so each fresh call's time over the median of
its own run's timed calls (its *ratio*) scatters around 1. A cache keyed on the input's content (a
hash of it, or only a sample of its values) computes a fresh input once and replays every seen one:
its ratios are the model's cost over a lookup's, far above 1 on every fresh call.

The rule asks for both a typical ratio and nearly every ratio to be high, so an honest model on a
noisy host (a launch-bound call's time has a long tail) is not taken for one: with at least
``MIN_CALLS`` fresh calls, the candidate is rejected when the median ratio is at least
``MEDIAN_RATIO`` and at least ``SHARE`` of the ratios are at least ``SLOWER``. A cache that saves
less than that, or a model whose timings give fewer fresh calls (inputs too large to send
``MIN_CALLS`` fresh sets, ``reference.FRESH_MAX_BYTES``), is not judged; the result records the
ratios either way.

A paired re-timing's blocks (``engine/paired.py``) are later timings of the same process: a cache that
counts its timings could compute honestly through the ordinary one and replay only there. With a
paired re-timing asked for, ``BLOCK_SETS`` more fresh sets are sent, and each candidate block makes
one fresh call with probability ``BLOCK_CHANCE`` while they last; their ratios (each over its own
block's median) are judged alike, apart from the ordinary timing's. Standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

CHECK = "content_cache"
MIN_CALLS = 4
MEDIAN_RATIO = 2.0
SLOWER = 1.5
SHARE = 0.75
BLOCK_SETS = 16  # fresh sets kept for a paired re-timing's blocks, beside EvalRequest.fresh_input_sets
BLOCK_CHANCE = 0.5  # the chance that a candidate block makes a fresh call (one), while sets last


def pool_size(fresh_input_sets: int, paired: bool) -> int:
    """How many fresh sets an evaluation asks for: the ordinary timing's, and the blocks' when paired."""
    return fresh_input_sets + (BLOCK_SETS if paired and fresh_input_sets > 0 else 0)


def ratios(fresh_ms: Sequence[float], samples_ms: Sequence[float]) -> list[float]:
    """Each fresh call's time over the median of its run's timed calls (none without both)."""
    if not fresh_ms or not samples_ms:
        return []
    median = statistics.median(samples_ms)
    return [ms / median if median > 0 else float("inf") for ms in fresh_ms]


def summary(all_ratios: Sequence[float]) -> dict[str, object]:
    """What the result keeps (``environment["fresh_inputs"]``): the calls, their median ratio, the ratios."""
    return {"calls": len(all_ratios),
            "median_ratio": round(statistics.median(all_ratios), 4) if all_ratios else None,
            "ratios": [round(value, 4) for value in all_ratios]}


def judge(all_ratios: Sequence[float], where: str = "the timing") -> str | None:
    """Why the fresh calls of ``where`` say its timed calls were replayed (the rejection's reason), or None."""
    n = len(all_ratios)
    if n < MIN_CALLS:
        return None
    median = statistics.median(all_ratios)
    slower = sum(1 for value in all_ratios if value >= SLOWER)
    if median < MEDIAN_RATIO or slower < SHARE * n:
        return None
    return (f"timing: calls on {n} input sets it had never been shown, made at random places among the timed "
            f"calls of {where}, took {median:.1f}x the timed calls' median (median ratio; {slower} of {n} at least "
            f"{SLOWER:g}x): the timed calls, on inputs it had seen, were answered from a cache keyed on the "
            "input's content")
