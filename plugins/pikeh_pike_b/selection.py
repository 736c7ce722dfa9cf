"""PIKE-B's parent selection and branch split, as pure functions so the rules can be tested alone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Parent:
    """A program the next phase improves; ``key`` is None for the task's reference program."""

    key: str | None
    code: str


@dataclass(frozen=True)
class Solution:
    """A correct attempt of the phase just finished."""

    key: str
    code: str
    runtime_ms: float
    branch: int  # the parent slot its lineage came from (the idea index in phase 0)
    order: tuple[int, ...]  # (slot, fix number): the stable tie-break for equal runtimes


FASTEST, SPREAD = "fastest", "spread"
PARENT_RULES = (FASTEST, SPREAD)


def rank_parents(solutions: Iterable[Solution], reference: Parent, max_parents: int,
                 rule: str = FASTEST) -> list[Parent]:
    """The next phase's parents, best first; only the phase just finished counts (no elitism).

    ``fastest`` (PIKE's rule): every solution sorted by runtime, then the reference as a fallback; the
    first ``max_parents``. PIKE's code builds a best-of-each-branch list and then re-sorts the whole
    candidate list by runtime, so several parents may come from one branch.
    ``spread`` (ours): the fastest solution of each branch first (sorted by runtime), then the rest by
    runtime, so a single lucky branch cannot take every parent slot.
    Equal runtimes are ranked by slot, then fix number.
    """
    ordered = sorted(solutions, key=lambda s: (s.runtime_ms, s.order))
    if rule == SPREAD:
        best_of_branch: dict[int, Solution] = {}
        for solution in ordered:
            best_of_branch.setdefault(solution.branch, solution)
        firsts = list(best_of_branch.values())
        ordered = firsts + [s for s in ordered if best_of_branch[s.branch] is not s]
    elif rule != FASTEST:
        raise ValueError(f"unknown parent rule {rule!r}")
    ranked = [Parent(s.key, s.code) for s in ordered] + [reference]
    return ranked[:max_parents]


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` queries over ``parts`` parents as evenly as possible, larger shares first
    (10 over 4 gives 3,3,2,2; over 3 gives 4,3,3)."""
    if parts < 1:
        raise ValueError("need at least one part")
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
