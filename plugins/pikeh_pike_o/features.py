"""MAP-Elites feature coordinates of a program: code complexity and code diversity, binned.

OpenEvolve's default feature dimensions. Each raw value is min-max scaled over every value seen so
far in the task (so the grid stretches as the search finds longer or stranger programs) and cut into
``bins`` equal bins. A program's coordinates are computed once, when it enters the database.

- complexity: the program's length in characters.
- diversity: the mean distance from the program to a reference set of programs: the first
  ``reference_size`` distinct programs that entered the database (the task's reference first). The
  distance is the Jaccard distance between the sets of tokens (identifiers, numbers, punctuation) of
  the two programs: 0 for the same vocabulary, 1 for nothing in common. A fixed, insertion-ordered
  reference set keeps the coordinates a pure function of the programs seen, so a resumed run computes
  the same ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FEATURES = ("complexity", "diversity")
REFERENCE_SIZE = 20
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\sA-Za-z0-9_]")


def tokens(code: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(code))


def distance(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard distance between two token sets."""
    union = len(a | b)
    return 0.0 if union == 0 else 1.0 - len(a & b) / union


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
    """Computes coordinates and keeps the state they depend on (ranges, the diversity reference set)."""

    bins: int
    reference_size: int = REFERENCE_SIZE
    ranges: dict[str, _Range] = field(default_factory=dict)
    references: list[str] = field(default_factory=list)
    _tokens: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)

    def coords(self, code: str) -> tuple[int, ...]:
        """The program's (complexity, diversity) bins; updates the ranges and the reference set."""
        complexity = self._bin("complexity", float(len(code)))
        raw = self.diversity(code)
        diversity = 0 if raw is None else self._bin("diversity", raw)
        if len(self.references) < self.reference_size and code not in self.references:
            self.references.append(code)
        return (complexity, diversity)

    def diversity(self, code: str) -> float | None:
        """Mean distance to the reference programs other than itself; None before there are any."""
        others = [ref for ref in self.references if ref != code]
        if not others:
            return None
        mine = self._token_set(code)
        return sum(distance(mine, self._token_set(ref)) for ref in others) / len(others)

    def _bin(self, name: str, value: float) -> int:
        if name not in self.ranges:
            self.ranges[name] = _Range(value, value)
        scale = self.ranges[name]
        scale.include(value)
        return max(0, min(self.bins - 1, int(scale.scale(value) * self.bins)))

    def _token_set(self, code: str) -> frozenset[str]:
        found = self._tokens.get(code)
        if found is None:
            found = self._tokens[code] = tokens(code)
        return found
