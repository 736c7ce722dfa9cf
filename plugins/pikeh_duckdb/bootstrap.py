"""Percentile-bootstrap confidence intervals for suite scores over tasks and seeds.

Why this design (docs/report.md, "Seeds, bands and confidence intervals", says it for users):

- A configuration's score is the geometric mean of its per-task speedups, averaged over its seeds:
  ``exp(mean_t mean_s ln speedup[t, s])``. Each task's search in a run is independent of the others
  (its own RNG stream, its own queries), so tasks, each with its seeds, are independent clusters.
- The interval is a percentile bootstrap over *tasks*, each drawn with all its seeds (a cluster
  bootstrap). It answers "how much would the score move with another draw of tasks like these and
  another draw of seeds": a task's mean over its seeds carries the seed noise, so resampling the
  tasks accounts for both. Resampling the seeds again inside each drawn task (a two-stage bootstrap)
  would count the seed noise twice and overstate the spread (Davison & Hinkley 1997, section 3.8). With
  one seed it is the plain task bootstrap. With one task there is nothing to resample but its seeds,
  so the bootstrap is over seeds. A bootstrap over seeds alone for several tasks was rejected: with
  two or three seeds it has a handful of distinct values and understates the spread.
- Every point of a curve uses the same draws (common random numbers), so a band is as smooth as its
  curve and its points can be compared with each other.
- A paired comparison of two configurations draws the same tasks for both (the pairing).

Replicates are computed with a weight matrix: replicate r's score is ``sum_ts W[r, t, s] * L[t, s]``,
with ``W`` summing to one per replicate, so a whole curve is one matrix product.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
REPLICATES = 2000
SEED = 20240607  # a fixed generator: the same inputs give the same report


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


def weights(available: np.ndarray, replicates: int = REPLICATES, *, rng: np.random.Generator | None = None,
            tasks: np.ndarray | None = None) -> np.ndarray:
    """Bootstrap weights, shape (replicates, T, S), each replicate summing to one.

    ``available[t, s]`` says whether seed s has a value for task t (every task needs at least one).
    Tasks are drawn with their seeds; a single task's seeds are drawn instead. ``tasks`` (replicates,
    T), when given, are the task counts to use: a paired comparison passes the same counts to both of
    its configurations.
    """
    rng = rng or np.random.default_rng(SEED)
    n_tasks, n_seeds = available.shape
    if n_tasks == 1:  # nothing to resample but the seeds
        seeds = np.flatnonzero(available[0])
        picks = rng.integers(0, len(seeds), size=(replicates, len(seeds)))
        out = np.zeros((replicates, 1, n_seeds))
        # out[:, 0, :] is a view: adding into it fills out
        np.add.at(out[:, 0, :], (np.arange(replicates)[:, None], seeds[picks]), 1.0 / len(seeds))
        return out
    if tasks is None:
        tasks = task_counts(n_tasks, replicates, rng)
    return (tasks / n_tasks)[:, :, None] * (available / available.sum(axis=1, keepdims=True))[None]


def task_counts(n_tasks: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """How often each task is drawn in each replicate: (replicates, T), rows summing to T."""
    return rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=replicates).astype(float)


def point_weights(available: np.ndarray) -> np.ndarray:
    """The estimate's own weights: every task counts once, its seeds equally."""
    per_task = available / available.sum(axis=1, keepdims=True)
    return per_task / available.shape[0]


def percentile(replicates: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval along the first axis."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail], axis=0)
    return low, high


def log_mean_intervals(logs: np.ndarray, *, replicates: int = REPLICATES, level: float = LEVEL,
                       rng: np.random.Generator | None = None) -> list[Interval]:
    """Intervals for ``exp(mean ln x)`` at each point of a curve.

    ``logs`` has shape (P, T, S): P curve points, T tasks, S seeds; NaN where a seed has no value for a
    task (the same cells at every point). Returns one Interval per point, on the ratio scale.
    """
    available = ~np.isnan(logs[0])
    filled = np.nan_to_num(logs)
    estimate = np.einsum("ts,pts->p", point_weights(available), filled)
    draws = np.einsum("rts,pts->rp", weights(available, replicates, rng=rng), filled)
    low, high = percentile(draws, level)
    return [Interval(float(np.exp(e)), float(np.exp(lo)), float(np.exp(hi)))
            for e, lo, hi in zip(estimate, low, high, strict=True)]


def mean_interval(values: Sequence[float], *, replicates: int = REPLICATES, level: float = LEVEL,
                  rng: np.random.Generator | None = None) -> Interval:
    """The plain percentile bootstrap of a mean (one seed, values as tasks): what the tests check
    against samples of a known distribution."""
    logs = np.asarray(values, dtype=float)[None, :, None]
    draws = np.einsum("rts,pts->rp", weights(~np.isnan(logs[0]), replicates, rng=rng), logs)[:, 0]
    low, high = percentile(draws, level)
    return Interval(float(np.mean(values)), float(low), float(high))


@dataclass(frozen=True)
class Comparison:
    """Configuration A against B over their common tasks."""

    n_tasks: int
    ratio: Interval  # geomean(A) / geomean(B)
    difference: Interval  # geomean(A) - geomean(B)
    favour_a: int  # tasks where A's mean log speedup over its seeds is higher
    favour_b: int
    ties: int


def compare(logs_a: np.ndarray, logs_b: np.ndarray, *, replicates: int = REPLICATES, level: float = LEVEL,
            rng: np.random.Generator | None = None, tie: float = 1e-9) -> Comparison:
    """Paired bootstrap of two configurations: (T, S_a) and (T, S_b) log speedups on the same T tasks.

    Each replicate draws the tasks once for both (the pairing); with one task, each side's seeds.
    """
    rng = rng or np.random.default_rng(SEED)
    avail_a, avail_b = ~np.isnan(logs_a), ~np.isnan(logs_b)
    a, b = np.nan_to_num(logs_a), np.nan_to_num(logs_b)
    counts = task_counts(a.shape[0], replicates, rng)
    draws_a = np.einsum("rts,ts->r", weights(avail_a, replicates, rng=rng, tasks=counts), a)
    draws_b = np.einsum("rts,ts->r", weights(avail_b, replicates, rng=rng, tasks=counts), b)
    est_a = float(np.sum(point_weights(avail_a) * a))
    est_b = float(np.sum(point_weights(avail_b) * b))
    ratio_low, ratio_high = percentile(draws_a - draws_b, level)
    diff_low, diff_high = percentile(np.exp(draws_a) - np.exp(draws_b), level)
    per_task = (a * avail_a).sum(1) / avail_a.sum(1) - (b * avail_b).sum(1) / avail_b.sum(1)
    return Comparison(
        n_tasks=a.shape[0],
        ratio=Interval(float(np.exp(est_a - est_b)), float(np.exp(ratio_low)), float(np.exp(ratio_high))),
        difference=Interval(float(np.exp(est_a) - np.exp(est_b)), float(diff_low), float(diff_high)),
        favour_a=int(np.sum(per_task > tie)), favour_b=int(np.sum(per_task < -tie)),
        ties=int(np.sum(np.abs(per_task) <= tie)))
