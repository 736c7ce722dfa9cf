"""Pure parts of the trusted timings: the paired statistics against a known distribution, the block
parameters and stop rule, and the noise canary's decision and baselines."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from pike_harness.worker import paired_stats
from pike_harness.worker.inside.pinning import migrations, pinned
from pike_harness.worker.records import EvalResult, NoiseReport, PairedSpec, PairedTiming
from pike_harness.worker.supervise import fresh_inputs, noise
from pike_harness.worker.supervise.engine import EngineConfig, EngineError, resolve
from pike_harness.worker.supervise.engine.paired import _stop_reason, block_params, left_core, rotation


def _draw(rng: random.Random, n: int, speedup: float, sigma: float) -> list[tuple[float, float]]:
    """``n`` pairs whose reference/candidate ratio is lognormal around ``speedup`` (a drifting host
    scales both sides of a pair alike, so the drift must cancel)."""
    pairs = []
    for _ in range(n):
        host = math.exp(rng.gauss(0.0, 0.5))  # the host's speed of the moment, shared by the pair
        candidate = 0.2 * host
        pairs.append((candidate * speedup * math.exp(rng.gauss(0.0, sigma)), candidate))
    return pairs


def test_the_interval_covers_the_true_speedup_about_95_in_100_times():
    rng = random.Random(20261128)
    true = 2.5
    covered = 0
    for _ in range(100):
        estimate = paired_stats.estimate(_draw(rng, 8, true, 0.1))
        assert estimate.ci_low <= estimate.speedup <= estimate.ci_high
        covered += estimate.ci_low <= true <= estimate.ci_high
    assert 90 <= covered <= 99


def _sticky(rng: random.Random, n: int, speedup: float, rho: float, sigma: float) -> list[tuple[float, float]]:
    """``n`` pairs whose log ratio wanders as an AR(1) series around log ``speedup`` (each side keeps
    its speed of the moment for several blocks, as launch-bound processes were seen to on an H200)."""
    state = rng.gauss(0.0, sigma) / math.sqrt(1.0 - rho * rho)
    pairs = []
    for _ in range(n):
        state = rho * state + rng.gauss(0.0, sigma)
        pairs.append((0.2 * speedup * math.exp(state), 0.2))
    return pairs


def test_the_interval_still_covers_when_successive_pairs_move_together():
    """With a lag-1 correlation of 0.6 between neighbouring ratios, a plain t interval over 20 pairs holds
    the true speedup about 65 times in 100 (measured with this fixture); counting effective pairs brings
    it near 87. Seeded, so the count is fixed."""
    rng = random.Random(20261129)
    true = 1.0
    covered = 0
    plain_covered = 0
    for _ in range(400):
        pairs = _sticky(rng, 20, true, 0.6, 0.2)
        estimate = paired_stats.estimate(pairs)
        covered += estimate.ci_low <= true <= estimate.ci_high
        assert 2.0 <= estimate.effective_n <= 20
        logs = [math.log(r / c) for r, c in pairs]
        mean = sum(logs) / 20
        margin = paired_stats.t_quantile_95(19) * math.sqrt(sum((x - mean) ** 2 for x in logs) / 19 / 20)
        plain_covered += abs(mean) <= margin
    assert plain_covered <= 300  # the fixture does defeat the plain interval
    assert covered >= 320, (covered, plain_covered)


def test_independent_pairs_are_counted_in_full_and_correlated_ones_are_not():
    alternating = [(2.0, 1.0), (3.0, 1.0)] * 5  # neighbours on opposite sides of the mean: rho < 0
    estimate = paired_stats.estimate(alternating)
    assert estimate.autocorrelation < 0 and estimate.effective_n == 10
    runs = [(2.0, 1.0)] * 5 + [(3.0, 1.0)] * 5  # the same ratios, one speed for five pairs, then another
    sticky = paired_stats.estimate(runs)
    assert sticky.speedup == pytest.approx(estimate.speedup)
    assert sticky.autocorrelation > 0.5 and sticky.effective_n < 4
    assert sticky.halfwidth > 2 * estimate.halfwidth
    assert paired_stats.effective_pairs(20, 0.6) == pytest.approx(5.0)
    assert paired_stats.effective_pairs(3, 0.99) == 2.0 and paired_stats.effective_pairs(8, -0.4) == 8.0


def test_the_estimate_is_the_geometric_mean_of_the_ratios_and_the_drift_cancels():
    pairs = [(2.0, 1.0), (8.0, 2.0), (0.3, 0.1)]  # ratios 2, 4, 3 on a host whose speed moved 20x
    estimate = paired_stats.estimate(pairs)
    assert estimate.speedup == pytest.approx((2 * 4 * 3) ** (1 / 3))
    assert estimate.halfwidth > 0
    assert paired_stats.converged(pairs, 10.0, 3) and not paired_stats.converged(pairs, 10.0, 4)
    with pytest.raises(ValueError):
        paired_stats.estimate([(1.0, 1.0)])


def test_the_stop_rule_and_the_block_parameters():
    spec = PairedSpec(target_halfwidth=0.02, min_pairs=3, max_pairs=4, max_seconds=1.0, block_ms=50.0)
    steady = [(2.0, 1.0)] * 3
    assert _stop_reason(steady, spec, 0.1) == "converged"
    noisy = [(2.0, 1.0), (3.0, 1.0)]
    assert _stop_reason(noisy, spec, 0.1) == ""
    assert _stop_reason(noisy, spec, 5.0) == "max_seconds"
    assert _stop_reason(noisy * 2, spec, 0.1) == "max_pairs"
    assert _stop_reason(noisy[:1], spec, 5.0) == "", "never before two pairs: there is no interval yet"
    # Blocks' fresh calls that condemn on too few calls for the median test: convergence does not stop it.
    few = fresh_inputs.FreshTimes([9.0] * 6, [1.0] * 300)
    assert fresh_inputs.undecided(few)
    assert _stop_reason(steady, spec, 0.1, few) == ""
    assert _stop_reason(steady * 2, spec, 0.1, few) == "max_pairs"  # the caps still do
    enough = fresh_inputs.FreshTimes([9.0] * 16, [1.0] * 300)
    honest = fresh_inputs.FreshTimes([1.0] * 6, [1.0] * 300)
    assert _stop_reason(steady, spec, 0.1, enough) == _stop_reason(steady, spec, 0.1, honest) == "converged"
    params = block_params({"window": "strict", "rep_ms": 999}, spec)
    assert params["rep_ms"] == 50.0 and params["window"] == "strict" and params["warmup_ms"] < 50.0


def test_the_canary_decision():
    limits = noise.NoiseLimits(canary_tolerance=0.5, max_steal=0.05, redo=2)
    assert noise.judge(0.1, 0.12, 0.1, 0.0, limits) is None
    assert "canary read 0.2000 ms after" in noise.judge(0.1, 0.2, 0.1, 0.0, limits)
    assert "before" in noise.judge(0.2, 0.1, 0.11, None, limits)
    # faster than the baseline is never noisy: the baseline was read on a busier host
    assert noise.judge(0.05, 0.02, 0.11, None, limits) is None
    assert "steal" in noise.judge(0.1, 0.1, 0.1, 0.2, limits)
    # missing readings cannot make a timing noisy: no baseline yet, no canary, no steal accounting
    assert noise.judge(5.0, 5.0, None, None, limits) is None
    assert noise.judge(None, None, 0.1, None, limits) is None


def test_baselines_are_per_device_medians_of_unflagged_readings():
    watch = noise.NoiseWatch(noise.NoiseLimits())
    assert watch.baseline("cuda:0") is None
    for reading in (0.1, 0.11, 0.09):
        report = watch.report("cuda:0", reading, reading, 0.0)
        assert report.flagged is None  # no baseline yet
        watch.record("cuda:0", report)
    assert watch.baseline("cuda:0") == pytest.approx(0.1)
    assert watch.baseline("cuda:1") is None
    off = watch.report("cuda:0", 0.1, 0.5, 0.0, redone=2)
    assert off.flagged and off.redone == 2 and off.canary_baseline_ms == pytest.approx(0.1)
    watch.record("cuda:0", off)
    assert watch.baseline("cuda:0") == pytest.approx(0.1), "a flagged reading never moves the baseline"
    for _ in range(3):  # a quieter host: faster readings are not flagged, and bring the baseline down
        quiet = watch.report("cuda:0", 0.04, 0.04, 0.0)
        assert quiet.flagged is None
        watch.record("cuda:0", quiet)
    assert watch.baseline("cuda:0") < 0.1


def test_steal_from_proc_stat_readings():
    assert noise.steal_fraction((10, 1000), (20, 1100)) == pytest.approx(0.1)
    assert noise.steal_fraction((10, 1000), (10, 1000)) is None  # no tick moved
    assert noise.steal_fraction(None, (1, 2)) is None
    now = noise.read_cpu_times()
    assert now is None or (now[0] >= 0 and now[1] > 0)


def test_noise_options_resolve_and_bad_values_are_one_line_errors():
    plan = resolve(EngineConfig(noise_canary_tolerance=0.3, noise_redo=0), ["cpu"])
    assert plan.noise == noise.NoiseLimits(canary_tolerance=0.3, max_steal=0.05, redo=0)
    with pytest.raises(EngineError, match="noise-max-steal"):
        resolve(EngineConfig(noise_max_steal=2.0), ["cpu"])


def test_paired_cores_resolve_rotate_by_default_and_bad_values_are_one_line_errors():
    assert resolve(EngineConfig(), ["cpu"]).paired_cores == "rotate"
    assert resolve(EngineConfig(paired_cores="free"), ["cpu"]).paired_cores == "free"
    with pytest.raises(EngineError, match="paired-cores"):
        resolve(EngineConfig(paired_cores="everywhere"), ["cpu"])


def test_each_rotation_is_the_sandbox_cores_in_a_fresh_order():
    # A re-timing that converges after a few pairs samples only the first cores of its order: a fixed
    # order would give every re-timing of a run the same few cores (and their bias).
    cores = sorted(os.sched_getaffinity(0))
    candidate = SimpleNamespace(session=os.getpid(), settings=SimpleNamespace(paired_cores="rotate"))
    orders = [rotation(candidate) for _ in range(64)]
    assert all(sorted(order) == cores for order in orders)
    if len(cores) > 1:  # all 64 starting on one core: 2 ** -63 at two cores
        assert len({order[0] for order in orders}) > 1
    candidate.settings.paired_cores = "free"
    assert rotation(candidate) == []
    candidate.settings.paired_cores, candidate.session = "rotate", None
    assert rotation(candidate) == []


def test_a_pinned_block_runs_on_its_core_alone_and_gives_the_thread_its_cores_back():
    before = os.sched_getaffinity(0)
    core = max(before)
    with pinned(core) as pin:
        assert pin is not None and os.sched_getaffinity(0) == {core}
        report = pin.report()
        assert report["core"] == core and report["held"] is True
        assert report["moves"] in (0, None)  # pinned, the kernel has nowhere to move it (None: not counted)
    assert os.sched_getaffinity(0) == before
    for unusable in (None, True, "3", max(before) + 4096):  # not a core, or not one this thread may use
        with pinned(unusable) as pin:
            assert pin is None and os.sched_getaffinity(0) == before
    with pytest.raises(RuntimeError), pinned(core):
        raise RuntimeError("a failing block")
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to leave one")
def test_a_pin_reports_a_thread_that_widened_its_mask_during_the_block():
    before = os.sched_getaffinity(0)
    with pinned(min(before)) as pin:
        assert pin is not None
        os.sched_setaffinity(0, before)  # what a candidate's forward may do
        assert pin.report()["held"] is False
    assert os.sched_getaffinity(0) == before


def test_the_kernels_migration_count_is_read_where_it_is_kept():
    count = migrations()
    if Path("/proc/thread-self/sched").exists() and "se.nr_migrations" in Path("/proc/thread-self/sched").read_text():
        assert isinstance(count, int) and count >= 0
    else:
        assert count is None


@pytest.mark.parametrize("reply, left", [
    ({"pin": {"core": 1, "held": True, "moves": 0}}, False),
    ({"pin": {"core": 1, "held": True, "moves": None}}, False),  # a kernel that does not count moves
    ({"pin": {"core": 1, "held": False, "moves": 0}}, True),  # the mask was changed
    ({"pin": {"core": 1, "held": True, "moves": 2}}, True),  # set back, but it moved meanwhile
    ({"pin": None}, True),  # the pin could not be set (its process narrowed its own mask)
    ({}, True),
    ({"pin": {"core": 1, "held": "yes", "moves": True}}, True),  # only a plain True holds
])
def test_a_block_left_its_core_when_its_pin_report_says_so_or_is_missing(reply, left):
    assert left_core(reply) is left


def test_results_carry_noise_and_paired_through_json():
    result = EvalResult(request_id="r", task="t/1", category="correct", runtime_ms=1.0,
                        noise=NoiseReport(canary_before_ms=0.1, canary_after_ms=0.2, flagged="x"),
                        paired=PairedTiming(speedup=2.0, ci_low=1.9, ci_high=2.1, pairs=[[2.0, 1.0]],
                                            windows=[["reference", 1, 2]], noise=NoiseReport(steal_fraction=0.0),
                                            cores=[3, 4]))
    back = EvalResult.from_json(result.to_json())
    assert back.noise == result.noise and back.paired == result.paired
