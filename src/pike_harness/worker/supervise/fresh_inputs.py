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

The rule asks for three things, so an honest model on a noisy host is not taken for one. With at least
``MIN_CALLS`` fresh calls, a run condemns the candidate when (1) the median ratio is at least
``MEDIAN_RATIO``, (2) at least ``SHARE`` of the ratios are at least ``SLOWER``, and (3) the fresh calls
rank too high among the run's own timed calls to be chance (``rank_p`` at most ``RANK_P``). The third
is there because a call's time can have a wide spread of its own: level3-pike 13's published solution
(a 0.1 ms model whose timed calls spread from 0.08 to 0.32 ms, IQR 0.09 ms) read fresh ratios of 1.0,
1.1, 2.1 and 2.3 on an H200 (2026-11-30), a hair from (1) and (2) with nothing cached. An honest
model's fresh call is one more call like its timed ones, so its rank among them is uniform whatever
their spread, and a sum of ranks this high has a known, small chance; a cache's fresh calls sit above
nearly every timed call. A run meeting (1) and (2) but not (3) is flagged ``SUSPECT_FLAG`` instead:
a cache that replays only a little over half its calls ranks its fresh calls in the upper half only,
which eight calls cannot tell from chance. Only the kept run of the ordinary timing (after the noise
canary's redos) is judged. A run whose ratios condemn (``slow``) is taken again (``CONFIRMATIONS``):
only when the second run's ratios condemn too are both runs' calls judged together, ranks included,
and 16 calls tell even a cache replaying 55 % of its calls from chance (nearly every time, in
simulation) where 8 could not. A run too short of sets to judge never clears the runs before it
(``Runs``). A ratio's denominator is the smaller of the run's mean and median, so a
cache that replays only some calls lowers it under either protocol's headline. A cache that saves
less than the margin keeps that saving; a task whose sets are too large for ``MIN_CALLS`` of them
within ``MAX_BYTES`` is not judged (the result records the ratios anyway).

A paired re-timing's blocks (``engine/paired.py``) are later timings of the same process, where a
cache that counts its timings could wait to replay: with a paired re-timing asked for,
``BLOCK_SETS`` more sets are made, each candidate block makes one fresh call while they last, and
their ratios (each over its own block, ranked among every block's timed calls over their own block's
typical call) are judged alike, apart from the ordinary timing's.
Standard library only, and the reference client's seed draw.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
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
RANK_P = 0.001  # how seldom an honest model's fresh calls may rank as high by chance and still condemn
SUSPECT_FLAG = "fresh_calls_slower"  # the ratios condemn, their ranks do not: flagged, not rejected


@dataclass
class FreshTimes:
    """Fresh calls' ratios and the timed calls' own ratios over the same typical call, which the fresh
    ones are ranked among (one run's; or every paired block's, each over its own block's typical call)."""

    fresh: list[float] = field(default_factory=list)
    timed: list[float] = field(default_factory=list)

    def extend(self, other: FreshTimes) -> None:
        self.fresh += other.fresh
        self.timed += other.timed


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


def ratios(fresh_ms: Sequence[float], samples_ms: Sequence[float]) -> FreshTimes:
    """Each fresh call's time, and each timed call's, over the smaller of the run's mean and median
    timed call (no fresh ratios without both)."""
    if not fresh_ms or not samples_ms:
        return FreshTimes()
    typical = min(statistics.fmean(samples_ms), statistics.median(samples_ms))

    def over(ms: float) -> float:
        return min(ms / typical, MAX_RATIO) if typical > 0 else MAX_RATIO

    return FreshTimes([over(ms) for ms in fresh_ms], [over(ms) for ms in samples_ms])


def ranks(times: FreshTimes) -> list[float]:
    """Each fresh call's rank among the timed calls: how many were strictly faster, over their count
    plus one. An honest fresh call is as likely as any timed call to fall anywhere among them (it is
    one more of them), so this is at most a uniform draw from [0, 1): ties and the count's coarseness
    only lower it, so a test on it errs towards the candidate."""
    ordered = sorted(times.timed)
    return [bisect.bisect_left(ordered, value) / (len(ordered) + 1) for value in times.fresh]


def rank_p(all_ranks: Sequence[float]) -> float:
    """The chance that as many independent uniform draws sum to at least these ranks' sum (the upper
    tail of the Irwin-Hall distribution, exact in rationals: a float sum of its alternating terms
    cancels to noise past 20 or so calls)."""
    n = len(all_ranks)
    if n == 0:
        return 1.0
    below = Fraction(n) - sum((Fraction(value) for value in all_ranks), Fraction(0))  # P(S >= s) = P(S <= n - s)
    if below <= 0:
        return 0.0
    if below >= n:
        return 1.0
    total = sum(((-1) ** k * math.comb(n, k) * (below - k) ** n for k in range(math.floor(below) + 1)), Fraction(0))
    return float(total / math.factorial(n))


class Runs:
    """The ordinary timing's runs' fresh calls, run by run, and which of them its verdict rests on
    (``judged``). A run whose ratios condemn is taken again, once (``CONFIRMATIONS``); when the next
    run's condemn too, both runs' calls are judged together. A run left with too few sets to judge
    (a task whose sets are large gets 4 in all, and a redone or condemned run spends them) does not
    clear the candidate: the calls of the runs before it are judged instead."""

    def __init__(self) -> None:
        self.pooled = FreshTimes()  # the runs whose ratios condemned
        self.latest = FreshTimes()  # the latest run with calls enough to judge (one redone for noise too)
        self.judged = FreshTimes()
        self.confirmed = 0

    def seen(self, times: FreshTimes) -> None:
        """Every run, kept or redone for noise."""
        if len(times.fresh) >= MIN_CALLS:
            self.latest = times

    def kept(self, times: FreshTimes) -> bool:
        """A run kept after the noise canary's redos: True when the timing is over, False when it is
        to be taken again (its ratios condemn and a confirmation is due)."""
        if not slow(times):
            earlier = self.pooled if self.pooled.fresh else self.latest
            # Too few calls to judge, after runs that had enough: theirs are judged. With none before,
            # this run's few calls are what the result records (not judged: ``MIN_CALLS``).
            self.judged = earlier if len(times.fresh) < MIN_CALLS and earlier.fresh else times
            return True
        self.pooled.extend(times)
        self.judged = self.pooled
        if self.confirmed >= CONFIRMATIONS:
            return True
        self.confirmed += 1
        return False


def summary(times: FreshTimes) -> dict[str, object]:
    """What the result keeps (``environment["fresh_inputs"]``): the calls, their median ratio, the
    ratios, and the rank test's chance (``rank_p``)."""
    all_ratios = times.fresh
    return {"calls": len(all_ratios),
            "median_ratio": round(statistics.median(all_ratios), 4) if all_ratios else None,
            "ratios": [round(value, 4) for value in all_ratios],
            "rank_p": float(f"{rank_p(ranks(times)):.3g}") if all_ratios else None}


def _slow(all_ratios: Sequence[float]) -> tuple[float, int] | None:
    """(median ratio, calls at ``SLOWER`` or more) when the ratios alone condemn (rules 1 and 2), else None."""
    n = len(all_ratios)
    if n < MIN_CALLS:
        return None
    median = statistics.median(all_ratios)
    slower = sum(1 for value in all_ratios if value >= SLOWER)
    if median < MEDIAN_RATIO or slower < SHARE * n:
        return None
    return median, slower


def slow(times: FreshTimes) -> bool:
    """Whether the ratios alone condemn (rules 1 and 2): a run the supervisor takes again."""
    return _slow(times.fresh) is not None


def judge(times: FreshTimes, where: str = "the timing") -> str | None:
    """Why the fresh calls of ``where`` say its timed calls were replayed (the rejection's reason), or None."""
    slow = _slow(times.fresh)
    if slow is None:
        return None
    chance = rank_p(ranks(times))
    if chance > RANK_P:
        return None
    median, slower = slow
    n = len(times.fresh)
    return (f"timing: calls on {n} input sets it had never been shown, made at random places among the timed "
            f"calls of {where}, took {median:.1f}x the timed calls' typical time (median ratio; {slower} of {n} at "
            f"least {SLOWER:g}x; ranked among the timed calls, a chance of {chance:.2g} for an honest model): the "
            "timed calls, on inputs it had seen, were answered from a cache keyed on the input's content")


def suspect(times: FreshTimes) -> bool:
    """The ratios condemn but the ranks do not (``SUSPECT_FLAG``): the timed calls spread too wide to
    tell, or a cache replays only some of them."""
    return slow(times) and judge(times) is None
