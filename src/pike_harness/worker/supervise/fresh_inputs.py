"""Fresh calls: input sets the candidate never saw, called among its timed calls, and the verdict on
their times.

The timed calls rotate through the input sets the check showed, so a cache keyed on the input's
content (a hash of it, or only a sample of its values) computes each set once and replays it in every
timed call: a right answer that no comparison of outputs can see. So the timed loop also makes a few
uncounted calls on sets the candidate's process was never shown (``timing.FreshCalls``), at random
places among its timed calls, by the same clock. An honest model costs the same on any input of the
task's shapes, so each fresh call's time over its run's typical timed call (its *ratio*) scatters
around 1; a cache's ratios are the model's cost over a lookup's, far above 1 on every fresh call.

Where the sets come from: seeds drawn here for each evaluation (``draw``; none of its public or
hidden seeds, never reused, so nothing learnt in one evaluation, through a JIT cache say, helps in
the next) go to the candidate's process with its request, which makes the sets with the task's
``get_inputs`` before the candidate is imported, keeps them in memory (at most ``MAX_BYTES``) and
forgets the seeds. No file ever holds them: a file in the exchange folder, where the hidden sets
lie, can be read by the candidate before its timing (an audit of 2026-11-30 did, and replayed).

The rule asks for both a typical ratio and nearly every ratio to be high, so an honest model on a
noisy host (a launch-bound call's time has a long tail) is not taken for one: with at least
``MIN_CALLS`` fresh calls, a run condemns the candidate when the median ratio is at least
``MEDIAN_RATIO`` and at least ``SHARE`` of the ratios are at least ``SLOWER``. Only the kept run of
the ordinary timing (after the noise canary's redos) is judged, and a run that condemns is taken again
(``CONFIRMATIONS``): the rejection needs the second run too. A ratio's denominator is the smaller of
the run's mean and median, so a cache that replays only some calls lowers it under either protocol's
headline. A cache that saves less than the margin keeps that saving; a task whose sets are too large
for ``MIN_CALLS`` of them within ``MAX_BYTES`` is not judged (the result records the ratios anyway).

A paired re-timing's blocks (``engine/paired.py``) are later timings of the same process, where a
cache that counts its timings could wait to replay: with a paired re-timing asked for,
``BLOCK_SETS`` more sets are made, each candidate block makes one fresh call while they last, and
their ratios (each over its own block) are judged alike, apart from the ordinary timing's.
Standard library only, and the reference client's seed draw.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from pike_harness.worker.supervise.reference import draw_seeds

CHECK = "content_cache"
MIN_CALLS = 4
MEDIAN_RATIO = 2.0
SLOWER = 1.5
SHARE = 0.75
CONFIRMATIONS = 1  # runs taken again after one that condemns, each of which must condemn too
SPARE_RUNS = 2  # ordinary runs beyond the first with fresh sets of their own (a redo, a confirmation)
BLOCK_SETS = 16  # sets for a paired re-timing's blocks, one per candidate block
MAX_BYTES = 256 * 1024 * 1024  # the fresh sets a candidate's process makes and keeps, in bytes at most
MAX_RATIO = 1e6  # a ratio over a run whose typical call read 0 ms


def pool_size(fresh_input_sets: int, paired: bool) -> int:
    """How many fresh sets an evaluation asks for: the ordinary timing's runs', and the blocks' when paired."""
    if fresh_input_sets <= 0:
        return 0
    return fresh_input_sets * (1 + SPARE_RUNS) + (BLOCK_SETS if paired else 0)


def draw(request: Any, hidden: Iterable[int], enabled: bool = True) -> list[int]:
    """Secret seeds for one evaluation's fresh sets (``request``: an ``EvalRequest``), none of its public
    or hidden seeds; none when ``enabled`` is False or the request asks for none."""
    count = pool_size(int(request.fresh_input_sets), request.paired is not None) if enabled else 0
    return draw_seeds(count, exclude={*request.input_seeds, *hidden})


def ratios(fresh_ms: Sequence[float], samples_ms: Sequence[float]) -> list[float]:
    """Each fresh call's time over the smaller of its run's mean and median timed call (none without both)."""
    if not fresh_ms or not samples_ms:
        return []
    typical = min(statistics.fmean(samples_ms), statistics.median(samples_ms))
    return [min(ms / typical, MAX_RATIO) if typical > 0 else MAX_RATIO for ms in fresh_ms]


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
            f"calls of {where}, took {median:.1f}x the timed calls' typical time (median ratio; {slower} of {n} at "
            f"least {SLOWER:g}x): the timed calls, on inputs it had seen, were answered from a cache keyed on the "
            "input's content")
