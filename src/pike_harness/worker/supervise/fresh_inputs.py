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
the next) go to the candidate's process, which asks for them before the candidate is imported and
gets them as a binary frame, not inside a message (``worker.inside.fresh_seeds``: JSON text of them
outlived its parse, and the candidate read it from its own memory, an audit of 2026-12-01), makes
the sets with the task's ``get_inputs``, keeps them in memory (at most ``MAX_BYTES``) and zeroes the
seeds. No file ever holds them: a file in the exchange folder, where the hidden sets
lie, can be read by the candidate before its timing (an audit of 2026-11-30 did, and replayed).

The rule asks for three things, so an honest model on a noisy host is not taken for one. With at
least ``MIN_CALLS`` fresh calls, the calls condemn the candidate when (1) their median ratio is at
least ``MEDIAN_RATIO``, (2) at least ``SHARE`` of the ratios are at least ``SLOWER``, and (3) they
rank too high among their run's own timed calls (``rank_p``) or lie above the run's median timed
call too often (``median_p``) to be chance, either at ``CHANCE``. Why (3): a call's time can spread
wide on its own. level3-pike 13's published solution (a 0.1 ms model whose timed calls spread from
0.08 to 0.32 ms) read fresh ratios of 1.0, 1.1, 2.1 and 2.3 on an H200 (2026-11-30), a hair from (1)
and (2) with nothing cached. An honest model's fresh call is one more call like its timed ones, so
both tests' chances hold whatever the spread; a cache's fresh calls sit above nearly every timed
call, and always above the median, which is a cache's headline. Why both: a cache that slows some of
its replays past the model's cost on purpose pulls the fresh calls' ranks down, but cannot put them
below its median.

Only the kept run of the ordinary timing (after the noise canary's redos) is judged, and only a
confirmed judgement rejects (``Runs``): a run whose ratios condemn (``slow``) is taken again, and
when the second run's condemn too, both runs' calls are judged together (16 calls tell a cache that
replays just over half its calls from chance, nearly every time in simulation, where 8 seldom do).
A run too short of sets to judge clears nothing: the runs before it are judged, and can only flag.
Calls whose ratios condemn where the tests or a confirmation do not are flagged ``SUSPECT_FLAG``; a
kept run with too few calls to judge, ``UNJUDGED_FLAG``. A ratio's denominator is the smaller of the
run's mean and median, so a cache that replays only some calls lowers it under either protocol's
headline. A cache that saves less than the margin keeps that saving.

A paired re-timing's blocks (``engine/paired.py``) are later timings of the same process, where a
cache that counts its timings could wait to replay: with a paired re-timing asked for,
``BLOCK_SETS`` more sets are made, each candidate block makes one fresh call while they last, and
their ratios (each over its own block, tested against every block's timed calls over their own
block's typical call) are judged alike, apart from the ordinary timing's.
Standard library only, and the reference client's seed draw.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pike_harness.worker.supervise import noise
from pike_harness.worker.supervise.reference import draw_seeds

CHECK = "content_cache"
MIN_CALLS = 4
MEDIAN_RATIO = 2.0
SLOWER = 1.5
SHARE = 0.75
CONFIRMATIONS = 1  # runs taken again after one that condemns, each of which must condemn too
MAX_CONFIRMATIONS = 4  # and more, while the pooled calls are too few for the median test to condemn (``decidable``)
BLOCK_SETS = 16  # sets for a paired re-timing's blocks, one per candidate block
MAX_BYTES = 256 * 1024 * 1024  # the fresh sets a candidate's process makes and keeps, in bytes at most
MAX_RATIO = 1e6  # a ratio over a run whose typical call read 0 ms
CHANCE = 0.0005  # each test's level (``rank_p``, ``median_p``): either condemns, so an honest model's is 0.001
SUSPECT_FLAG = "fresh_calls_slower"  # the ratios condemn, the tests or a confirmation do not: flagged, not rejected
UNJUDGED_FLAG = "fresh_calls_unjudged"  # the kept run had too few fresh calls to judge (large sets, or spent)


@dataclass
class FreshTimes:
    """Fresh calls' ratios and the timed calls' own ratios over the same typical call, which the fresh
    ones are ranked among (one run's; or every paired block's, each over its own block's typical call)."""

    fresh: list[float] = field(default_factory=list)
    timed: list[float] = field(default_factory=list)

    def extend(self, other: FreshTimes) -> None:
        self.fresh += other.fresh
        self.timed += other.timed


RETRIED_RUNS = 1  # a run begun beside others' models and cut short (out of device memory), taken again alone


def pool_size(fresh_input_sets: int, paired: bool, redos: int = noise.NoiseLimits().redo) -> int:
    """How many fresh sets an evaluation asks for: enough for every run its ordinary timing can make
    (the first, ``redos`` redone for noise, ``CONFIRMATIONS``, and ``RETRIED_RUNS`` whose sets were
    spent before it was cut short), and the blocks' when paired. Why every run: with sets for fewer, a
    cache that got its first two timings redone for noise (a loaded core, or a host with steal) left
    its confirming run none, and so was only flagged (an audit, 2026-11-30), its headline the replays
    of a run with no fresh call in it; a run cut short by an out-of-memory error it raises itself
    spends its sets too (a second audit, the same night)."""
    if fresh_input_sets <= 0:
        return 0
    runs = 1 + max(0, redos) + CONFIRMATIONS + RETRIED_RUNS
    return fresh_input_sets * runs + (BLOCK_SETS if paired else 0)


def draw(request: Any, hidden: Iterable[int], enabled: bool = True, redos: int = noise.NoiseLimits().redo,
         set_bytes: int | None = None) -> list[int]:
    """Secret seeds for one evaluation's fresh sets (``request``: an ``EvalRequest``), none of its public
    or hidden seeds; none when ``enabled`` is False or the request asks for none. ``redos``: the noise
    limits' (``pool_size``). ``set_bytes``: the task's input set's size, when the reference process has
    made one: no more seeds than ``MAX_BYTES`` holds, so that the candidate's process makes no set it
    must drop (level3-pike 6's 919 MB set cost every evaluation 1.2 s on an H200 host, for none)."""
    count = pool_size(int(request.fresh_input_sets), request.paired is not None, redos) if enabled else 0
    if set_bytes:
        count = min(count, MAX_BYTES // set_bytes)
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


def rank_p(times: FreshTimes) -> float:
    """The rank test: how likely an honest model's fresh calls would outrank its timed calls this far.
    Its statistic is Mann-Whitney's U, the pairs (fresh, timed) where the timed call was strictly
    faster (a tie counts for the candidate). Under an honest model every fresh call is one more call
    like the timed ones, so U has mean n*m/2 and variance n*m*(n+m+1)/12 whatever the calls' spread;
    the chance is the normal tail at that variance, which at these tails is above U's own (a sum of
    near-uniform ranks has lighter tails than the normal): it errs towards the candidate. The fresh
    calls share their timed calls, so U's variance is larger than independent ranks' (an exact tail
    for independent ranks let 2-4x too many honest models through with 10-50 timed calls)."""
    n, m = len(times.fresh), len(times.timed)
    if not n or not m:
        return 1.0
    ordered = sorted(times.timed)
    u = sum(bisect.bisect_left(ordered, value) for value in times.fresh)
    z = (u - n * m / 2) / math.sqrt(n * m * (n + m + 1) / 12)
    return 0.5 * math.erfc(z / math.sqrt(2))


def median_p(times: FreshTimes) -> float:
    """The median test: how likely an honest model's fresh calls would lie above the run's median
    timed call as often as these do, exactly (the order of n + m exchangeable calls: i fresh calls
    below the j-th fastest timed one in C(j-1+i, i) * C(m-j+n-i, n-i) of the C(n+m, n) orders; the
    upper middle call for an even m, and a tie counts for the candidate). Why beside the rank test: a
    cache that makes some of its replays slower than the model on purpose pulls the fresh calls'
    ranks down while its median, the headline, stays the replay's; no fresh call can then be below
    the median. Each honest fresh call is above it about half the time: 10 of 10 is a chance of
    about 0.001."""
    n, m = len(times.fresh), len(times.timed)
    if not n or not m:
        return 1.0
    j = m // 2 + 1
    middle = sorted(times.timed)[j - 1]
    above = sum(1 for value in times.fresh if value > middle)
    ways = sum(math.comb(j - 1 + i, i) * math.comb(m - j + n - i, n - i) for i in range(n - above + 1))
    return min(1.0, ways / math.comb(n + m, n))


def decidable(times: FreshTimes) -> bool:
    """Whether these calls are enough for the median test to condemn a cache, with a margin: were
    every fresh call above the timed calls' median, its chance would be a tenth of ``CHANCE`` or less.
    Why: the rank test can be led astray by a cache that slows some replays past the model's cost, and
    the median test cannot be, but on few calls it cannot condemn at all (8 fresh calls among 20 timed
    give 0.0078 at best). A cache that made its estimate calls slow, so that its runs count as a slow
    model's (4 fresh calls, ``timing.FRESH_SLOW_MS``), and padded 4 of its 10 timed calls, was only
    flagged ``fresh_calls_slower``, about 3x faster than it was (an audit, 2026-12-01)."""
    if not times.fresh or not times.timed:
        return False
    return median_p(FreshTimes([math.inf] * len(times.fresh), times.timed)) <= CHANCE / 10


def undecided(times: FreshTimes) -> bool:
    """The ratios condemn (``slow``) on calls too few for the median test (``decidable``): more are due."""
    return slow(times) and not decidable(times)


class Runs:
    """The ordinary timing's runs' fresh calls, run by run, and which of them its verdict rests on
    (``judged``). A run whose ratios condemn is taken again, once (``CONFIRMATIONS``), and again while
    the calls pooled so far are too few for the median test (``decidable``, up to
    ``MAX_CONFIRMATIONS``); when every later run's condemn too, their calls are judged together, and
    only that judgement may reject (``final``). A run left with too few sets to judge (a task whose
    sets are large gets 4 in all, and a redone or condemned run spends them) does not clear the
    candidate: the calls of the runs before it are judged instead; confirmed (``CONFIRMATIONS`` met)
    they may reject, unconfirmed or from a run redone for noise they can only flag it."""

    def __init__(self) -> None:
        self.pooled = FreshTimes()  # the runs whose ratios condemned
        self.latest = FreshTimes()  # the latest run with calls enough to judge (one redone for noise too)
        self.judged = FreshTimes()
        self.final = False  # whether a judgement of ``judged`` may reject (else it flags)
        self.kept_calls = 0  # the kept run's fresh calls
        self.confirmed = 0
        self.pooled_runs = 0  # the runs in ``pooled``

    def seen(self, times: FreshTimes) -> None:
        """Every run, kept or redone for noise."""
        if len(times.fresh) >= MIN_CALLS:
            self.latest = times

    def kept(self, times: FreshTimes) -> bool:
        """A run kept after the noise canary's redos: True when the timing is over, False when it is
        to be taken again (its ratios condemn and a confirmation is due)."""
        self.kept_calls = len(times.fresh)
        if not slow(times):
            earlier = self.pooled if self.pooled.fresh else self.latest
            # Too few calls to judge, after runs that had enough: theirs are judged, to flag, or to reject
            # when they are confirmed runs already (sets spent by the confirmations past ``CONFIRMATIONS``
            # must not undo what two condemning runs could always do: an audit, 2026-12-01). With none
            # before, this run's few calls are what the result records (not judged: ``MIN_CALLS``).
            short = len(times.fresh) < MIN_CALLS and bool(earlier.fresh)
            confirmed = earlier is self.pooled and self.pooled_runs > CONFIRMATIONS
            self.judged, self.final = (earlier, confirmed) if short else (times, True)
            return True
        self.pooled.extend(times)
        self.pooled_runs += 1
        self.judged = self.pooled
        if self.confirmed >= CONFIRMATIONS and (decidable(self.pooled) or self.confirmed >= MAX_CONFIRMATIONS):
            self.final = True
            return True
        self.confirmed += 1
        return False


def summary(times: FreshTimes) -> dict[str, object]:
    """What the result keeps (``environment["fresh_inputs"]``): the calls, their median ratio, the
    ratios, and the two tests' chances (``rank_p``, ``median_p``)."""
    all_ratios = times.fresh
    return {"calls": len(all_ratios),
            "median_ratio": round(statistics.median(all_ratios), 4) if all_ratios else None,
            "ratios": [round(value, 4) for value in all_ratios],
            "rank_p": float(f"{rank_p(times):.3g}") if all_ratios else None,
            "median_p": float(f"{median_p(times):.3g}") if all_ratios else None}


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
    found = _slow(times.fresh)
    if found is None:
        return None
    chance = min(rank_p(times), median_p(times))
    if chance > CHANCE:
        return None
    median, slower = found
    n = len(times.fresh)
    return (f"timing: calls on {n} input sets it had never been shown, made at random places among the timed "
            f"calls of {where}, took {median:.1f}x the timed calls' typical time (median ratio; {slower} of {n} at "
            f"least {SLOWER:g}x; against the timed calls, a chance of {chance:.2g} for an honest model): the "
            "timed calls, on inputs it had seen, were answered from a cache keyed on the input's content")
