"""MAP-Elites feature coordinates of a program: code complexity and code diversity, binned.

OpenEvolve's default feature dimensions, computed as PIKE's fork (OpenEvolve 0.2.8) does:

- complexity: the program's length in characters;
- diversity: the mean of OpenEvolve's cheap difference heuristic between the program and a sample of
  up to ``sample_size`` (20) other programs of the database, drawn afresh each time a program is
  placed: ``0.1 * |length difference| + 10 * |line-count difference| + 0.5 * |symmetric difference of
  the character sets|`` (0 for identical code).

Each raw value is min-max scaled over every value seen so far in the task and cut into ``bins`` equal
bins (so the grid stretches as the search finds longer or stranger programs). The sample comes from the
``random.Random`` the database is given, which the search seeds from the task's rng, so a seed gives
the same coordinates.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

FEATURES = ("complexity", "diversity")
SAMPLE_SIZE = 20


def code_difference(a: str, b: str) -> float:
    """OpenEvolve's fast diversity heuristic between two programs."""
    if a == b:
        return 0.0
    length = abs(len(a) - len(b))
    lines = abs(a.count("\n") - b.count("\n"))
    chars = len(set(a) ^ set(b))
    return 0.1 * length + 10.0 * lines + 0.5 * chars


@dataclass
class _Range:
    low: float
    high: float

    def include(self, value: float) -> None:
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def scale(self, value: float) -> float:
        if self.high == self.low:
            return 0.5
        return min(1.0, max(0.0, (value - self.low) / (self.high - self.low)))


@dataclass
class FeatureSpace:
    """Computes coordinates and keeps the ranges they are scaled by."""

    bins: int
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    sample_size: int = SAMPLE_SIZE
    ranges: dict[str, _Range] = field(default_factory=dict)

    def coords(self, code: str, others: Sequence[str]) -> tuple[int, ...]:
        """The program's (complexity, diversity) bins against ``others`` (the database's programs)."""
        complexity = self._bin("complexity", float(len(code)))
        raw = self.diversity(code, others)
        diversity = 0 if raw is None else self._bin("diversity", raw)
        return (complexity, diversity)

    def diversity(self, code: str, others: Sequence[str]) -> float | None:
        """Mean difference to a sample of up to ``sample_size`` other programs; None with none."""
        pool = list(others)
        if not pool:
            return None
        sample = pool if len(pool) <= self.sample_size else self.rng.sample(pool, self.sample_size)
        return sum(code_difference(code, other) for other in sample) / len(sample)

    def _bin(self, name: str, value: float) -> int:
        if name not in self.ranges:
            self.ranges[name] = _Range(value, value)
        scale = self.ranges[name]
        scale.include(value)
        return max(0, min(self.bins - 1, int(scale.scale(value) * self.bins)))
