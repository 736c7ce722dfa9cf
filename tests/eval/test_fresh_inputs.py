"""Fresh calls: input sets the candidate's process sees only inside a timed loop, one call each
(``inside/timing.py`` ``FreshCalls``), made before its import (``loading.inputs_within``), the verdict
on their times (``supervise/fresh_inputs.py``) and the reference process's share (``reference.py``: the
kept outputs judged). The corpus plays the attacks from real candidates (``cache_by_content_sample``,
``cache_primed_from_exchange``, ``answers_only_seen_inputs``)."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest
import torch

from pike_harness.worker.inside import timing
from pike_harness.worker.inside import trusted as T
from pike_harness.worker.inside.protocols import get_protocol
from pike_harness.worker.inside.timing import FreshCalls, TimedLoop, checked_calls
from pike_harness.worker.records import EvalRequest
from pike_harness.worker.supervise import fresh_inputs, reference, timed_outputs

REPO = Path(__file__).resolve().parents[2]
SMOKE_1 = (REPO / "tasks" / "smoke" / "1_MatmulReLU.py").read_text()


def _sets(values):
    return [[torch.full((4, 4), float(value))] for value in values]


def _loop(forward, fresh, count, **protocol):
    sets = _sets(range(3))
    return TimedLoop(forward, sets, [[s[0] * 2] for s in sets], device=torch.device("cpu"),
                     protocol=get_protocol("quick", protocol), atol=1e-3, rtol=1e-3, fresh=fresh, fresh_count=count)


# -- the rule, on known distributions ------------------------------------------------------------------

def _times(fresh, timed=None):
    """Fresh ratios among timed ratios: by default 1,000 timed calls spread evenly over 0.8-1.2."""
    return fresh_inputs.FreshTimes(list(fresh), list(timed) if timed is not None else
                                   [0.8 + 0.4 * i / 999 for i in range(1000)])


def test_an_honest_models_ratios_are_not_judged_a_cache():
    """Ratios scattered around 1 with a long tail (a noisy host: a fifth of the calls 1.5-3x slow) are
    no cache, nor are too few fresh calls, however slow."""
    rng = random.Random(5)
    for _ in range(200):
        ratios = [rng.choice([rng.uniform(0.8, 1.25)] * 4 + [rng.uniform(1.5, 3.0)]) for _ in range(8)]
        assert fresh_inputs.judge(_times(ratios)) is None
    assert fresh_inputs.judge(_times([20.0] * (fresh_inputs.MIN_CALLS - 1))) is None


def test_a_cache_is_judged_and_the_reason_says_what_was_measured():
    reason = fresh_inputs.judge(_times([15.0, 16.5, 14.2, 1.1, 15.3, 14.8, 16.0, 15.1]))
    assert reason is not None
    assert "8 input sets it had never been shown" in reason and "15.1x" in reason and "7 of 8" in reason
    assert "of the ordinary timing" in fresh_inputs.judge(_times([9.0] * 4), "the ordinary timing")
    assert "cache keyed on the input's content" in reason and "a chance of" in reason


def test_a_cache_needs_both_a_high_median_and_nearly_every_call_slow():
    assert fresh_inputs.judge(_times([3.0] * 5 + [1.0] * 3)) is None  # 5 of 8 slow: under three in four
    assert fresh_inputs.judge(_times([1.6] * 8)) is None  # every call slower, but by less than the median's margin
    assert fresh_inputs.judge(_times([2.0] * 6 + [1.0] * 2)) is not None


def test_the_median_test_is_exact_and_the_rank_test_errs_towards_the_candidate():
    """The median test counts the orders of exchangeable calls: one fresh call lies above the j-th
    fastest of m timed calls in (m - j + 1) of m + 1 places. Both tests, on honest calls drawn from one
    distribution, condemn no more often than their level, even with few timed calls, where fresh
    calls share them (an exact tail for independent ranks let 2-4x too many through: an audit's
    count, 2026-11-30); a tie counts for the candidate."""
    timed = [float(i) for i in range(10)]  # m = 10: the median test's j-th fastest is the 6th (5.0)
    assert fresh_inputs.median_p(_times([5.5], timed)) == pytest.approx(5 / 11)
    assert fresh_inputs.median_p(_times([5.0], timed)) == 1.0  # a tie is not above
    assert fresh_inputs.median_p(_times([20.0] * 3, timed)) == pytest.approx(math.comb(7, 3) / math.comb(13, 3))
    assert fresh_inputs.rank_p(_times([4.5], timed)) == pytest.approx(0.5)
    assert fresh_inputs.rank_p(_times([], timed)) == fresh_inputs.median_p(_times([1.0], [])) == 1.0
    rng = random.Random(23)
    for n, m in ((8, 10), (16, 20), (4, 200)):
        draws = 20_000
        low_rank = low_median = 0
        for _ in range(draws):
            calls = [rng.random() for _ in range(n + m)]
            honest = _times(calls[:n], calls[n:])
            low_rank += fresh_inputs.rank_p(honest) <= 0.005
            low_median += fresh_inputs.median_p(honest) <= 0.005
        assert low_rank / draws <= 0.005 * 1.3 and low_median / draws <= 0.005 * 1.3, (n, m, low_rank, low_median)


def test_a_wide_honest_spread_is_flagged_not_rejected_when_its_ratios_alone_would_condemn():
    """level3-pike 13's published solution on an H200 (2026-11-30): timed calls from 0.08 to 0.32 ms
    around a median of 0.10, fresh ratios 1.0, 1.1, 2.1, 2.3. Drawn from the same wide spread, an honest
    model's fresh calls now and then meet the ratio rule; ranked among the timed calls they are chance.
    A cache's fresh calls on the same spread sit above all of them and are condemned."""
    rng = random.Random(13)
    timed = sorted([rng.uniform(0.8, 1.1) for _ in range(700)] + [rng.uniform(1.1, 3.1) for _ in range(300)])
    met = 0
    for _ in range(2000):
        honest = _times([rng.choice(timed) for _ in range(4)], timed)
        met += fresh_inputs.slow(honest)
        assert fresh_inputs.judge(honest) is None
    assert met > 0  # the ratio rule alone would have condemned these (the supervisor flags them)
    cache = _times([rng.uniform(3.2, 4.0) for _ in range(4)], timed)
    assert fresh_inputs.judge(cache) is not None


def test_a_cache_replaying_most_calls_is_rejected_and_one_replaying_just_over_half_needs_both_runs():
    """Timed calls: a replayed share at a tenth of the model's cost, the rest at its cost; the fresh
    calls all at its cost. Nine in ten replayed: the fresh calls top the timed ones, and one run is
    enough. Six in ten (the median headline is the replay's already): the fresh calls rank in the upper
    40 % only, which one run's 8 calls cannot tell from chance (flagged); the confirmation run's
    calls, pooled with the first's (the supervisor's rule), can."""
    rng = random.Random(17)

    def run(replayed):
        timed = [rng.uniform(0.09, 0.11) if rng.random() < replayed else rng.uniform(0.9, 1.1) for _ in range(1000)]
        typical = min(sum(timed) / len(timed), sorted(timed)[len(timed) // 2])
        return _times([rng.uniform(0.9, 1.1) / typical for _ in range(8)], [t / typical for t in timed])

    assert all(fresh_inputs.judge(run(0.9)) is not None for _ in range(20))
    alone = [run(0.6) for _ in range(40)]
    assert all(fresh_inputs.slow(times) for times in alone)
    assert 0 < sum(fresh_inputs.judge(times) is None for times in alone) < 40  # some runs alone are chance
    for first, second in zip(alone[::2], alone[1::2], strict=True):
        first.extend(second)
        assert fresh_inputs.judge(first) is not None


def test_a_cache_that_slows_some_replays_on_purpose_meets_the_median_test():
    """A cache that sleeps past the model's cost on 30 % of its replays pulls its fresh calls' ranks
    down to about 0.7, where the rank test reads chance, while its median, the headline, stays the
    replay's (an audit's candidate, 2026-11-30: `correct` with a flag). No fresh call can lie below
    that median: two runs' 16 calls, all above it, condemn."""
    rng = random.Random(29)

    def run():
        timed = [rng.uniform(1.9, 2.1) if i % 10 < 3 else rng.uniform(0.09, 0.11) for i in range(1000)]
        typical = min(sum(timed) / len(timed), sorted(timed)[len(timed) // 2])
        return _times([rng.uniform(0.9, 1.1) / typical for _ in range(8)], [t / typical for t in timed])

    first, second = run(), run()
    assert fresh_inputs.slow(first) and fresh_inputs.rank_p(first) > fresh_inputs.CHANCE
    first.extend(second)
    assert fresh_inputs.median_p(first) < fresh_inputs.CHANCE and fresh_inputs.judge(first) is not None


def test_the_runs_judged_a_confirmation_pools_and_a_run_short_of_sets_clears_nothing():
    """The supervisor's sequence of runs (``Runs``): a clean run is judged alone; a condemning run is
    taken again and, condemning again, pooled with it; a run left without sets (a task with 64 MB
    sets gets 4 in all: one run's worth) leaves the earlier calls judged, a redone run's included, but
    only a confirmed judgement may reject (``final``)."""
    honest, cache, none = _times([1.0] * 8), _times([9.0] * 4), _times([])

    runs = fresh_inputs.Runs()
    assert runs.kept(honest) and runs.judged is honest

    runs = fresh_inputs.Runs()
    eight = _times([9.0] * 8)
    assert not runs.kept(eight)  # taken again
    assert runs.kept(eight) and len(runs.judged.fresh) == 16 and fresh_inputs.judge(runs.judged) is not None
    assert runs.final  # confirmed: it may reject

    runs = fresh_inputs.Runs()  # 4 calls a run (a slow model's): taken again until the median test can condemn
    assert [runs.kept(cache) for _ in range(4)] == [False, False, False, True]
    assert len(runs.judged.fresh) == 16 and fresh_inputs.judge(runs.judged) is not None and runs.final

    runs = fresh_inputs.Runs()
    assert not runs.kept(cache)
    assert runs.kept(honest) and runs.judged is honest  # the confirmation cleared it

    runs = fresh_inputs.Runs()
    assert not runs.kept(cache)
    assert runs.kept(none) and fresh_inputs.judge(runs.judged) is not None  # no sets left: the first run stands,
    assert not runs.final and runs.kept_calls == 0  # unconfirmed: it flags, and the kept run is unjudged

    runs = fresh_inputs.Runs()
    one = _times([1.0])  # a task whose sets are too large for more (level3-pike 43: one 201 MB set)
    runs.seen(one)
    assert runs.kept(one) and runs.judged is one  # recorded, too few to judge
    assert fresh_inputs.summary(runs.judged)["calls"] == 1 and fresh_inputs.judge(runs.judged) is None

    runs = fresh_inputs.Runs()
    runs.seen(cache)  # a run redone for noise, which spent the sets
    runs.seen(none)
    assert runs.kept(none) and runs.judged is cache and fresh_inputs.judge(runs.judged) is not None
    assert not runs.final  # a run redone for noise never rejects alone


def test_a_cache_that_passes_for_a_slow_model_is_confirmed_until_the_median_test_can_condemn_it():
    """An audit's cache (2026-12-01) slept in its estimate calls, so its runs were a slow model's (4 fresh
    calls, 10 timed), and padded 4 of its 10 timed calls past the model's cost: the rank test saw
    nothing, and the median test cannot condemn 8 calls among 20 (0.0078 at best), so two runs only
    flagged it. Runs are now taken again while the pooled calls are too few for the median test."""
    padded = _times([500.0] * 4, [1.0] * 6 + [2000.0] * 4)  # replays at 1, padding at 2000, the model at 500
    two = fresh_inputs.FreshTimes()
    two.extend(padded)
    two.extend(padded)
    assert fresh_inputs.slow(two) and fresh_inputs.judge(two) is None and not fresh_inputs.decidable(two)
    runs = fresh_inputs.Runs()
    assert [runs.kept(padded) for _ in range(5)] == [False] * 4 + [True] and runs.final
    assert fresh_inputs.rank_p(runs.judged) > fresh_inputs.CHANCE  # the padding still hides it from ranks
    reason = fresh_inputs.judge(runs.judged)
    assert reason is not None and "20 input sets" in reason
    runs = fresh_inputs.Runs()  # the sets run out after two condemning runs: judged finally, as before the extra runs
    assert [runs.kept(padded), runs.kept(padded), runs.kept(_times([]))] == [False, False, True]
    assert runs.final and len(runs.judged.fresh) == 8 and fresh_inputs.judge(runs.judged) is None  # a flag, as before
    cache = _times([9.0] * 4, [1.0] * 10)
    runs = fresh_inputs.Runs()
    assert [runs.kept(cache), runs.kept(cache), runs.kept(_times([]))] == [False, False, True]
    assert runs.final and fresh_inputs.judge(runs.judged) is not None  # rejected, as two such runs always were
    runs = fresh_inputs.Runs()  # calls that condemn and stay too few to decide stop at the cap, judged as they are
    few = _times([500.0] * 4, [1.0] * 2 + [2000.0] * 2)
    kept = [runs.kept(few) for _ in range(1 + fresh_inputs.MAX_CONFIRMATIONS)]
    assert kept[-1] and not any(kept[:-1]) and runs.final and not fresh_inputs.decidable(runs.judged)


def test_ratios_are_over_the_smaller_of_the_runs_mean_and_median_and_the_summary_keeps_each():
    """The median under a long tail; the mean when some calls are far faster (a cache replaying only
    some calls leaves the median alone and pulls the mean, the ``pike`` protocol's headline, down).
    The timed calls' own ratios, over the same denominator, are what the fresh ones are ranked among."""
    assert fresh_inputs.ratios([2.0, 4.0], [1.0, 2.0, 100.0]).fresh == [1.0, 2.0]
    assert fresh_inputs.ratios([2.0, 4.0], [1.0, 2.0, 100.0]).timed == [0.5, 1.0, 50.0]
    assert fresh_inputs.ratios([1.0], [0.1, 1.0, 1.0]).fresh == pytest.approx([1.0 / 0.7])
    assert fresh_inputs.ratios([1.0], [0.0, 0.0]).fresh == [fresh_inputs.MAX_RATIO]  # finite, for the result's JSON
    assert fresh_inputs.ratios([], [1.0]) == fresh_inputs.FreshTimes() == fresh_inputs.ratios([1.0], [])
    summary = fresh_inputs.summary(_times([1.0, 3.0], [1.0, 2.0]))
    assert summary == {"calls": 2, "median_ratio": 2.0, "ratios": [1.0, 3.0], "rank_p": 0.5, "median_p": 0.5}
    assert fresh_inputs.summary(fresh_inputs.FreshTimes())["median_ratio"] is None


def test_blocks_pool_their_timed_calls_for_the_ranks():
    """Each paired block's fresh call is ranked among every block's timed calls (each over its own
    block's typical call): one block's few calls alone could not place it."""
    pooled = fresh_inputs.FreshTimes()
    for block in range(16):
        pooled.extend(fresh_inputs.ratios([10.0 * (1 + block)], [1.0 * (1 + block), 1.1 * (1 + block)]))
    assert len(pooled.fresh) == 16 and len(pooled.timed) == 32
    assert fresh_inputs.judge(pooled, "the paired re-timing's blocks") is not None


# -- the loop ------------------------------------------------------------------------------------------

def test_each_fresh_set_is_called_once_among_the_timed_calls_and_never_counted():
    """The fresh sets reach the model only in the timed part of the loop (after the warm-up), once each,
    through the same input buffer, staged before the run's first call; the timed samples are the planned repetitions all the same; a second
    run of the process gets none (each set could be replayed once seen)."""
    seen: list[float] = []
    taken_before: list[int] = []

    def forward(x):
        taken_before.append(fresh.used)
        seen.append(float(x[0, 0]))
        return x * 2

    fresh = FreshCalls(_sets([10.0, 11.0, 12.0]))
    loop = _loop(forward, fresh, 3, min_reps=20, max_reps=20)
    run = loop.run()
    # the run's sets went to the device before its first call (TimedLoop._staged), none while it ran
    assert taken_before[0] == 3
    assert len(run.samples_ms) == run.reps == 20
    assert len(run.fresh_ms) == 3 and all(ms >= 0 for ms in run.fresh_ms)
    assert run.fresh_at == sorted(run.fresh_at) and all(0 <= at < run.reps for at in run.fresh_at)
    calls_before_timing = len(seen) - run.reps - 3 - checked_calls(run.reps)  # and the checked calls
    assert sorted(value for value in seen if value >= 10.0) == [10.0, 11.0, 12.0]
    assert all(value < 10.0 for value in seen[:calls_before_timing])  # first call, estimate, warm-up
    again = _loop(forward, fresh, 3).run()
    assert again.fresh_ms == [] and fresh.used == 3


@pytest.mark.filterwarnings("ignore::FutureWarning")  # gc's walk touches torch's deprecated names
def test_held_fresh_sets_are_masked_and_unmask_exactly_into_the_calls_buffer():
    """A held set matches no input's shape, dtype or bytes (a search of the process's memory for
    tensors like its input finds none of them: corpus ``cache_primed_from_memory``), and unmasks bit
    for bit, the key tiled over more bytes than it has and a tail, into a contiguous buffer in place
    and into a strided one."""
    import gc

    big = torch.randn(17_000)  # 68,000 bytes: one whole key's worth and a tail
    small = torch.arange(15, dtype=torch.float16).reshape(3, 5)
    fresh = FreshCalls([[big.clone(), 3], [small.clone()]])  # copies: held as they are, they would be found
    masked, plain_int = fresh.sets[0]
    assert plain_int == 3 and masked.data.dtype == torch.uint8 and masked.data.dim() == 1
    assert not torch.equal(masked.data, timing._bytes_of(big))
    for wanted in (big, small):
        assert not any(isinstance(held, torch.Tensor) and held.shape == wanted.shape and held.dtype == wanted.dtype
                       and held is not wanted and torch.equal(held, wanted)
                       for held in gc.get_objects()
                       for held in (held if isinstance(held, list | tuple) else (held,)))
    buffer = torch.empty_like(big)
    masked.unmask_into(buffer, fresh.key)
    assert torch.equal(buffer, big)
    strided = torch.empty(5, 3, dtype=torch.float16).t()  # 3 x 5, not contiguous
    fresh.sets[1][0].unmask_into(strided, fresh.key)
    assert torch.equal(strided, small)
    with pytest.raises(ValueError, match="varies its shapes"):
        fresh.sets[1][0].unmask_into(torch.empty(5, 3, dtype=torch.float16), fresh.key)


def test_a_fresh_set_of_another_shape_is_spent_uncalled_not_failed():
    """A fresh set whose shape is not the checked sets' (a task whose shapes follow the seed, when the
    checked sets happen to agree) is never called: the run ends with the calls on the sets that fit,
    and the candidate is not failed for the task's inputs (the reference process names the task)."""
    seen = []

    def forward(x):
        seen.append(tuple(x.shape))
        return x * 2

    sets = _sets([10.0, 11.0]) + [[torch.full((5, 4), 12.0)], [torch.full((4, 4), 13.0, dtype=torch.float64)], [7]]
    sets += _sets([14.0])
    fresh = FreshCalls(sets)
    run = _loop(forward, fresh, 6, min_reps=16, max_reps=16).run()
    assert len(run.fresh_ms) == 3 and fresh.used == 6
    assert set(seen) == {(4, 4)}
    assert sorted(index for index, _ in fresh.drawn()) == [0, 1, 5]


def test_a_run_that_fails_gives_back_the_sets_it_had_not_called_yet():
    """A timing that ends early (out of device memory beside others' models, to be run again alone) must
    not spend fresh sets the candidate never saw: the run again makes its fresh calls."""
    calls = []

    def forward(x):
        calls.append(float(x[0, 0]))
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory")
        return x * 2

    fresh = FreshCalls(_sets([10.0, 11.0, 12.0, 13.0]))
    with pytest.raises(RuntimeError):
        _loop(forward, fresh, 4).run()
    assert fresh.used == 0
    run = _loop(lambda x: x * 2, fresh, 4, min_reps=16, max_reps=16).run()
    assert len(run.fresh_ms) == 4 and fresh.used == 4


def test_a_slow_models_few_repetitions_get_fewer_fresh_calls_and_the_rest_wait(monkeypatch):
    """A slow model's run: a quarter of the repetitions, at least 4 (the fresh calls are extra, and the
    device is held); any other run makes every fresh call asked for, however few its repetitions."""
    fresh = FreshCalls(_sets([10.0 + i for i in range(16)]))
    run = _loop(lambda x: x * 2, fresh, 8, min_reps=5, max_reps=5).run()
    assert len(run.fresh_ms) == 8 and fresh.used == 8
    monkeypatch.setattr(timing, "FRESH_SLOW_MS", 0.0)  # every call counts as slow here
    run = _loop(lambda x: x * 2, fresh, 8, min_reps=5, max_reps=5).run()
    assert len(run.fresh_ms) == timing.FRESH_MIN_CALLS and fresh.used == 12  # four sets given back


def test_a_model_is_slow_by_its_own_calls_not_by_the_flush_around_them(monkeypatch):
    """Whether a run makes fewer fresh calls follows the model's calls alone: a fast model behind a slow
    flush (a 2-core CPU runner's 32 MB one, say) keeps every fresh call. On a clock that only the
    model and the flush move, so that nothing here depends on the machine's speed."""
    clock = [0.0]
    zero_ = timing.T.zero_

    def flush(tensor):
        clock[0] += 0.2  # 200 ms a flush
        return zero_(tensor)

    def model(cost_s):
        def forward(x):
            clock[0] += cost_s
            return x * 2
        return forward

    monkeypatch.setattr(timing.T, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(timing.T, "zero_", flush)
    fresh = FreshCalls(_sets([10.0 + i for i in range(16)]))
    run = _loop(model(0.001), fresh, 8, min_reps=16, max_reps=16).run()
    assert run.estimate_ms > timing.FRESH_SLOW_MS and len(run.fresh_ms) == 8
    run = _loop(model(0.06), fresh, 8, min_reps=16, max_reps=16).run()
    assert len(run.fresh_ms) == timing.FRESH_MIN_CALLS


def test_a_fresh_calls_output_is_held_to_the_shape_and_may_not_be_the_harness_copy():
    """No validated output exists for a fresh set, but its output is still checked as a timed call's:
    another shape is rejected, and so is the harness's own copy of a validated output."""
    def wrong_shape(x):
        return x * 2 if float(x[0, 0]) < 10 else torch.zeros(3)

    with pytest.raises(timing.OutputProblem) as info:
        _loop(wrong_shape, FreshCalls(_sets([10.0])), 1).run()
    assert info.value.check == "timed_output_mismatch"

    loops = []

    def harness_copy(x):
        return x * 2 if float(x[0, 0]) < 10 else loops[0].validated[1][0]

    loops.append(_loop(harness_copy, FreshCalls(_sets([10.0])), 1))
    with pytest.raises(timing.OutputProblem) as info:
        loops[0].run()
    assert info.value.check == "harness_access"


def test_every_fresh_output_is_kept_while_they_fit():
    fresh = FreshCalls(_sets([10.0, 11.0, 12.0]))
    for index in fresh.take(3):
        fresh.offer(index, [fresh.sets[index][0].plain(fresh.key) * 2])
    assert [index for index, _ in fresh.drawn()] == [0, 1, 2]


def test_fresh_outputs_past_the_byte_budget_are_a_draw_of_clones_in_set_order(monkeypatch):
    """Past ``KEEP_BYTES`` (here two outputs' worth), a uniform sample over every fresh call is kept
    (reservoir sampling, with the random bytes fixed here): clones taken as each call returned, listed
    by fresh set."""
    draws = itertools.cycle([0, 5, 1])  # call 3 replaces slot 0; call 4 is not kept (5 % 4); call 5 slot 1
    monkeypatch.setattr(FreshCalls, "KEEP_BYTES", 2 * 16 * 4)
    fresh = FreshCalls(_sets([10.0, 11.0, 12.0, 13.0, 14.0]))
    monkeypatch.setattr(T, "urandom", lambda n: next(draws).to_bytes(n, "little"))
    for index in fresh.take(5):
        out = fresh.sets[index][0].plain(fresh.key) * 2
        fresh.offer(index, [out])
        out.zero_()  # the candidate reuses its buffer: the kept copy is what the call returned
    assert fresh.called == 5
    kept = fresh.drawn()
    assert [index for index, _ in kept] == [2, 4]
    assert [float(outputs[0][0, 0]) for _, outputs in kept] == [24.0, 28.0]


def test_the_draws_at_each_slot_place_every_check_and_every_fresh_call():
    """Drawn slot by slot (nothing planned ahead that a candidate could read from the loop's frame),
    a run still makes exactly its checks, and every fresh call lands before one of its timed calls."""
    for reps in (1, 2, 7, 500):
        checks = timing.checked_calls(reps)
        slots, left = reps + checks, checks
        for slot in range(slots):
            if timing.checked_here(left, slots - slot):
                left -= 1
        assert left == 0
        due = 8
        for i in range(reps):
            due -= timing.fresh_here(due, reps - i)
        assert due == 0


# -- the reference process -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    made = reference.ReferenceOracle("cpu", tmp_path_factory.mktemp("fresh-reference"))
    yield made
    made.close()


def _request(**overrides) -> EvalRequest:
    return EvalRequest(task="smoke/1", reference_source=SMOKE_1, candidate_source="", **overrides)


def test_the_fresh_sets_are_the_tasks_own_inputs_within_the_byte_cap_and_leave_no_seed_readable():
    """Made in the candidate's process before its import (``child.load``): the task's get_inputs under each
    seed in order, while they fit the cap; torch's generator is reseeded after, so no fresh seed can be
    read back (``torch.initial_seed()``) by code that runs later in that process."""
    from pike_harness.worker.inside import loading

    module = loading.load_source(SMOKE_1, "fresh_test_inputs")
    seeds = [11, 12, 13, 14]
    made = loading.inputs_within(module, seeds, 3 * 128 * 512 * 4)
    assert len(made) == 3
    for values, seed in zip(made, seeds, strict=False):
        assert torch.equal(values[0], loading.make_inputs(module, seed)[0])
    loading.inputs_within(module, seeds, 10**9)
    assert torch.initial_seed() not in seeds
    assert loading.inputs_within(module, seeds, 0) == []
    made_sets = []
    inner = module.get_inputs
    module.get_inputs = lambda: made_sets.append(1) or inner()
    assert len(loading.inputs_within(module, seeds, 3 * 128 * 512 * 4)) == 3
    assert len(made_sets) == 3  # no fourth set made only to be dropped: the last set's size says it would not fit


TASK_KEEPING_SOME_INPUTS = """
import torch
KEPT = torch.ones(8)
BYTES = bytearray(b"\\x07" * 16)

def get_inputs():
    return [torch.randn(64, 32), KEPT, KEPT[:4], torch.frombuffer(BYTES, dtype=torch.uint8), 5]
"""


def test_a_fresh_sets_plain_tensors_are_zeroed_once_masked_unless_the_task_keeps_them():
    """Freed unwiped, a fresh set's plain bytes stayed in the heap for a candidate reading
    ``/proc/self/mem`` to find. Once masked, a tensor only the harness holds is zeroed; one the task
    keeps (a module-level tensor, a view of it, a buffer's bytes) is left whole, else the task's own
    later inputs would change; the masked copies still hold every set's values."""
    from pike_harness.worker.inside import loading

    module = loading.load_source(TASK_KEEPING_SOME_INPUTS, "fresh_test_wipe")
    made = loading.inputs_within(module, [21, 22], 10**6)
    values = [[value.clone() if isinstance(value, torch.Tensor) else value for value in set_] for set_ in made]
    fresh = FreshCalls(made)
    for held, plain, wanted in zip(fresh.sets, made, values, strict=True):
        assert torch.count_nonzero(plain[0]) == 0  # only the harness held it: wiped
        assert torch.equal(held[0].plain(fresh.key), wanted[0])  # after it was masked
        assert plain[4] == held[4] == 5
    assert torch.equal(module.KEPT, torch.ones(8)) and bytes(module.BYTES) == b"\x07" * 16
    assert torch.equal(made[0][2], torch.ones(4))


def test_fresh_seeds_are_drawn_for_each_evaluation_and_none_is_public_or_hidden():
    request = _request(input_seeds=[0, 5])
    first, second = fresh_inputs.draw(request, [7, 9]), fresh_inputs.draw(request, [7, 9])
    assert len(first) == fresh_inputs.pool_size(8, paired=False) == 40 and len(set(first)) == 40
    assert first != second and not set(first) & {0, 5, 7, 9}
    assert fresh_inputs.draw(request, [7], enabled=False) == []
    assert fresh_inputs.draw(_request(fresh_input_sets=0), []) == []


def test_once_the_reference_made_a_set_no_more_seeds_are_drawn_than_the_byte_cap_holds(oracle, tmp_path):
    """The candidate's process would make a set the cap then drops (level3-pike 6's 919 MB one, on every
    evaluation): once the reference process has written a task's sets, the seeds are as many as the cap
    holds of sets that size, and none for a set over it."""
    from pike_harness.worker.inside import loading

    request = _request()
    assert oracle.set_bytes(request) is None
    oracle.write_inputs(request, [3, 4], tmp_path / "inputs.pt", timeout_s=120)
    made = loading.make_inputs(loading.load_source(SMOKE_1, "fresh_test_set_bytes"), 3)
    assert oracle.set_bytes(request) == sum(t.numel() * t.element_size() for t in made) > 0
    assert len(fresh_inputs.draw(request, [], set_bytes=fresh_inputs.MAX_BYTES // 3)) == 3
    assert fresh_inputs.draw(request, [], set_bytes=fresh_inputs.MAX_BYTES + 1) == []
    assert len(fresh_inputs.draw(request, [], set_bytes=1)) == fresh_inputs.pool_size(8, paired=False)


def test_the_reference_judges_drawn_fresh_outputs_against_its_own_on_the_same_set(oracle, tmp_path):
    """A fresh call's drawn output is compared with the reference model's output on that fresh set: the
    right answer passes, another set's answer is ``incorrect/fresh_input``."""
    from pike_harness.worker import output_file
    from pike_harness.worker.check_plan import check_plan
    from pike_harness.worker.inside import loading

    request = _request()
    hidden, fresh = oracle.hidden_seeds(request), fresh_inputs.draw(_request(), [])
    seeds = list(request.input_seeds) + hidden
    module = loading.load_source(SMOKE_1, "fresh_test_reference_2")
    torch.manual_seed(request.weight_seed)
    model = module.Model(*module.get_init_inputs())

    def judged(answer_seed: int, name: str) -> dict:
        with torch.no_grad():
            out = model(*loading.make_inputs(module, answer_seed))
        path = tmp_path / name
        writer = output_file.OutputWriter(str(path))
        writer.add([out])
        writer.close()
        return oracle.compare_timed(request, seeds, path, [], ["seed 0", "hidden seed", "hidden seed"],
                                    check_plan(len(seeds)), timeout_s=120, fresh_seeds=[fresh[3]])

    assert judged(fresh[3], "right.pt")["comparison"]["category"] is None
    wrong = judged(fresh[4], "wrong.pt")["comparison"]
    assert (wrong["category"], wrong["check"]) == ("incorrect", timed_outputs.FRESH_CHECK)
    assert "answers right only on the inputs it had seen" in wrong["reason"]
