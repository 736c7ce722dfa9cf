"""The paired speedup: a candidate and its reference timed in alternating blocks, and how sure we are.

Why paired blocks: on a shared host the speed of a launch-bound model moves by 2-3x between days and
by tens of percent within minutes. Two timings taken minutes apart do not measure the same machine,
so their ratio carries the drift. Timing reference and candidate in short alternating blocks
(R C R C ...) makes each pair of neighbouring blocks see nearly the same host; the drift cancels in
the pair's ratio, and the spread of the ratios across pairs says how sure the speedup is.

The estimate is the geometric mean of the pairs' speedups (reference time over candidate time), with
a two-sided 95% Student-t interval computed on the log scale (ratios are multiplicative, and the log
of a ratio is close to normal when each block is a mean of many calls). Sampling stops once the
interval's relative half-width is within the target, or at a cap (pairs or seconds).

Successive pairs are not always independent. A launch-bound process can keep one speed for several
blocks and then switch (on an H200, 2026-11-29, a computation paired with itself read 0.03 ms a call
on one side and 0.10 ms on the other for six pairs in a row), so neighbouring ratios move together
and n pairs carry less than n pairs' worth of evidence. A plain t interval then claims too much: it
held the true ratio of 1.0 in 2 of 4 such runs. The interval therefore counts an effective number
of pairs: with the ratios' lag-1 autocorrelation rho > 0 (an AR(1) model of the drift), n * (1 - rho)
/ (1 + rho), at least 2, for both its standard error and its degrees of freedom. A negative rho is
not used to narrow it.

Standard library only: the eval worker imports this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95% Student-t quantiles by degrees of freedom; a df between entries uses the nearest
# smaller entry (slightly conservative, never optimistic).
T_QUANTILES_95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    22: 2.074,
    24: 2.064,
    26: 2.056,
    28: 2.048,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
    1000: 1.962,
}


def t_quantile_95(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table, rounded down in df)."""
    if df < 1:
        raise ValueError("a t interval needs at least 2 observations")
    return T_QUANTILES_95[max(k for k in T_QUANTILES_95 if k <= df)]


@dataclass(frozen=True)
class PairedEstimate:
    """The speedup of a candidate over its reference from ``n`` paired blocks."""

    n: int
    speedup: float  # geometric mean of reference_ms / candidate_ms over the pairs
    ci_low: float
    ci_high: float
    reference_ms: float  # geometric mean of the reference's block times
    candidate_ms: float  # geometric mean of the candidate's block times
    autocorrelation: float = 0.0  # lag-1 autocorrelation of the pairs' log ratios (0 when undefined)
    effective_n: float = 0.0  # the pairs' worth of evidence the interval counts (n when rho <= 0)

    @property
    def halfwidth(self) -> float:
        """The interval's relative half-width: the larger distance of a bound from the estimate, as a
        fraction of it (on a log-symmetric interval, high/speedup - 1)."""
        return max(self.ci_high / self.speedup - 1.0, 1.0 - self.ci_low / self.speedup)


def estimate(pairs: Sequence[tuple[float, float]]) -> PairedEstimate:
    """The paired estimate of ``pairs`` of (reference_ms, candidate_ms); at least 2 pairs, all positive."""
    if len(pairs) < 2:
        raise ValueError("a paired interval needs at least 2 pairs")
    if any(not (r > 0 and c > 0) or math.isinf(r) or math.isinf(c) for r, c in pairs):
        raise ValueError("block times must be positive and finite")
    logs = [math.log(r / c) for r, c in pairs]
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    rho = lag1_autocorrelation(logs)
    effective = effective_pairs(n, rho)
    margin = t_quantile_95(max(1, math.floor(effective) - 1)) * sd / math.sqrt(effective)
    return PairedEstimate(
        n=n,
        speedup=math.exp(mean),
        ci_low=math.exp(mean - margin),
        ci_high=math.exp(mean + margin),
        reference_ms=math.exp(sum(math.log(r) for r, _ in pairs) / n),
        candidate_ms=math.exp(sum(math.log(c) for _, c in pairs) / n),
        autocorrelation=rho,
        effective_n=effective,
    )


def lag1_autocorrelation(values: Sequence[float]) -> float:
    """The lag-1 sample autocorrelation of ``values`` (0.0 for fewer than 3 values or no spread)."""
    n = len(values)
    if n < 3:
        return 0.0
    mean = sum(values) / n
    spread = sum((x - mean) ** 2 for x in values)
    if spread <= 0.0:
        return 0.0
    return sum((values[i] - mean) * (values[i + 1] - mean) for i in range(n - 1)) / spread


def effective_pairs(n: int, rho: float) -> float:
    """How many independent pairs ``n`` pairs with lag-1 autocorrelation ``rho`` are worth (AR(1)):
    n (1 - rho) / (1 + rho) for rho > 0, never below 2 nor above n."""
    if rho <= 0.0:
        return float(n)
    return min(float(n), max(2.0, n * (1.0 - rho) / (1.0 + rho)))


def converged(pairs: Sequence[tuple[float, float]], target_halfwidth: float, min_pairs: int) -> bool:
    """Whether sampling may stop: at least ``min_pairs`` pairs and a half-width within the target."""
    if len(pairs) < max(2, min_pairs):
        return False
    return estimate(pairs).halfwidth <= target_halfwidth
