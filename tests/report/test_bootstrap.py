"""The report's bootstrap intervals checked against samples of known distributions: they cover the true
value at about the nominal rate and shrink like 1/sqrt(n), so the bands are not cosmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pikeh_duckdb import bootstrap


def _coverage(draw, truth: float, fixtures: int, replicates: int = 1000) -> tuple[float, float]:
    """(share of fixtures whose interval covers ``truth``, mean interval width) over independent draws."""
    rng = np.random.default_rng(1)
    covered, widths = 0, []
    for _ in range(fixtures):
        interval = draw(rng, replicates)
        covered += interval.low <= truth <= interval.high
        widths.append(interval.high - interval.low)
    return covered / fixtures, float(np.mean(widths))


def test_interval_of_a_mean_covers_at_the_nominal_rate_and_shrinks_like_one_over_root_n():
    mu, sd = 0.7, 0.5

    def fixture(n):
        return lambda rng, reps: bootstrap.mean_interval(rng.normal(mu, sd, n), replicates=reps, rng=rng)

    coverage, width_25 = _coverage(fixture(25), mu, fixtures=300)
    # The percentile bootstrap of a mean runs a little under 95% at n=25 (about 93%); 300 fixtures give a
    # binomial sd of about 1.3 points, so this window is 3-4 sd wide either way.
    assert 0.89 <= coverage <= 0.985
    _, width_100 = _coverage(fixture(100), mu, fixtures=60)
    assert width_25 / width_100 == pytest.approx(2.0, rel=0.12)  # four times the tasks: half the width
    # And the width is the right size, not only the right trend: 2 * 1.96 * sd / sqrt(n).
    assert width_25 == pytest.approx(2 * 1.96 * sd / math.sqrt(25), rel=0.12)


def test_interval_over_tasks_with_their_seeds_covers_the_mean():
    # ln speedup[t, s] = mu + task effect + seed noise; the configuration's mean over tasks and seeds.
    mu, task_sd, seed_sd, n_tasks, n_seeds = 0.3, 0.4, 0.3, 20, 3

    def draw(rng, reps):
        logs = mu + rng.normal(0, task_sd, (n_tasks, 1)) + rng.normal(0, seed_sd, (n_tasks, n_seeds))
        (interval,) = bootstrap.log_mean_intervals(logs[None], replicates=reps, rng=rng)
        return bootstrap.Interval(math.log(interval.estimate), math.log(interval.low), math.log(interval.high))

    coverage, width = _coverage(draw, mu, fixtures=250)
    assert 0.89 <= coverage <= 0.985
    # Both sources of noise, each counted once: sd of the mean = sqrt(task_sd^2/T + seed_sd^2/(T S)).
    true_sd = math.sqrt(task_sd ** 2 / n_tasks + seed_sd ** 2 / (n_tasks * n_seeds))
    assert width == pytest.approx(2 * 1.96 * true_sd, rel=0.12)


def test_one_task_is_resampled_over_its_seeds():
    mu, sd, n_seeds = 0.5, 0.2, 30

    def draw(rng, reps):
        (interval,) = bootstrap.log_mean_intervals(rng.normal(mu, sd, (1, 1, n_seeds)), replicates=reps, rng=rng)
        return bootstrap.Interval(math.log(interval.estimate), math.log(interval.low), math.log(interval.high))

    coverage, width = _coverage(draw, mu, fixtures=150)
    assert 0.87 <= coverage <= 0.99
    assert width == pytest.approx(2 * 1.96 * sd / math.sqrt(n_seeds), rel=0.15)


def test_missing_seeds_and_curves():
    logs = np.log(np.array([[[2.0, 2.0], [4.0, np.nan]], [[2.0, 8.0], [4.0, np.nan]]]))  # 2 points, 2 tasks
    first, second = bootstrap.log_mean_intervals(logs, replicates=200)
    assert first.estimate == pytest.approx(math.sqrt(2 * 4))
    assert second.estimate == pytest.approx(math.sqrt(4 * 4))  # task 1: geomean of its seeds 2 and 8
    assert first.low <= first.estimate <= first.high
    # Nothing varies at the first point within task 0, so its band is only the spread between tasks.
    assert first.low >= 2.0 - 1e-9 and first.high <= 4.0 + 1e-9


def test_paired_comparison_counts_and_interval():
    a = np.log(np.array([[2.0, 2.0], [3.0, 3.0], [1.0, 1.0], [1.5, 1.5]]))
    b = np.log(np.array([[1.0], [1.0], [1.0], [2.0]]))
    result = bootstrap.compare(a, b, replicates=500)
    assert (result.favour_a, result.favour_b, result.ties) == (2, 1, 1)
    ga, gb = (2 * 3 * 1 * 1.5) ** 0.25, 2 ** 0.25
    assert result.ratio.estimate == pytest.approx(ga / gb)
    assert result.difference.estimate == pytest.approx(ga - gb)
    assert result.ratio.low <= result.ratio.estimate <= result.ratio.high
    # Identical configurations differ by exactly nothing in every replicate (the tasks are paired).
    same = bootstrap.compare(a, a, replicates=200)
    assert (same.ratio.low, same.ratio.high) == pytest.approx((1.0, 1.0))
    assert (same.favour_a, same.favour_b, same.ties) == (0, 0, 4)
