"""Choosing what an iteration builds on: its parent, the island's top programs, and inspirations.

Pure functions of the database and a ``random.Random`` (the task's ``ctx.rng``), so a resumed run that
replays the same answers draws the same parents. Every pool is in insertion order before a draw.

Parent draw for an iteration on island ``k`` (OpenEvolve's explore / exploit / random split):

- with probability ``exploration``: uniformly from island ``k``; while ``k`` is empty (islands other
  than 0 start empty), PIKE's fork puts a fresh copy of the best program there and uses it as the
  parent, so the child joins island ``k`` (``empty_island = "whole"``, ours: any program of the
  database, whose island the child then joins);
- with probability ``exploitation``: uniformly from the archive members on island ``k``, else from the
  whole archive; an empty archive (nothing but the reference so far) falls back to the exploration pool;
- otherwise: uniformly from every program in the database.

With ``exclude_reference`` (the default) the reference is never in the archive, so it is never an
exploitation parent (PIKE's change).
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass

from .database import Program, ProgramDatabase, ranked

EXPLORE, EXPLOIT, RANDOM = "explore", "exploit", "random"


@dataclass(frozen=True)
class Draw:
    """A parent and how it was drawn: ``mode`` is the branch of the split, ``pool`` where the parent
    actually came from (``island``, ``seeded``, ``all``, ``archive-island`` or ``archive``)."""

    parent: Program
    mode: str
    pool: str


def sample_parent(db: ProgramDatabase, island: int, rng: random.Random, *, exploration: float,
                  exploitation: float) -> Draw:
    roll = rng.random()
    if roll < exploration:
        return _explore(db, island, rng, EXPLORE)
    if roll < exploration + exploitation:
        archived = db.archived()
        local = [p for p in archived if p.island == island]
        if local:
            return Draw(rng.choice(local), EXPLOIT, "archive-island")
        if archived:
            return Draw(rng.choice(archived), EXPLOIT, "archive")
        return _explore(db, island, rng, EXPLOIT)
    return Draw(rng.choice(db.all()), RANDOM, "all")


def _explore(db: ProgramDatabase, island: int, rng: random.Random, mode: str) -> Draw:
    """A uniform draw from the island. An empty island is seeded with a copy of the best program, which
    is the parent (PIKE's fork), unless ``empty_island = "whole"`` (ours: draw from the whole database)."""
    local = db.island(island)
    if local:
        return Draw(rng.choice(local), mode, "island")
    if db.config.empty_island == "seed":
        seed = db.seed_island(island)
        if seed is not None:
            return Draw(seed, mode, "seeded")
    return Draw(rng.choice(db.all()), mode, "all")


def top_programs(db: ProgramDatabase, island: int, count: int) -> list[Program]:
    """The island's ``count`` fittest programs. As in OpenEvolve, they may include the current program
    and failed programs (fitness 0) when the island has few better ones."""
    return ranked(db.island(island))[:count]


def diverse_programs(db: ProgramDatabase, island: int, count: int, rng: random.Random, *,
                     exclude: Collection[str] = (), pool: list[Program] | None = None) -> list[Program]:
    """Up to ``count`` programs drawn uniformly from ``pool`` (default: the whole island) less
    ``exclude``. PIKE's fork passes the island's next fittest after the top programs (so with 2 diverse
    programs, the 4th and 5th fittest) and shows them in the draw's order; ours draws from every program
    past the top and shows them in rank order."""
    rest = [p for p in (pool if pool is not None else ranked(db.island(island))) if p.id not in exclude]
    if count <= 0 or not rest:
        return []
    picked = rng.sample(range(len(rest)), min(count, len(rest)))
    return [rest[i] for i in picked] if pool is not None else [p for i, p in enumerate(rest) if i in set(picked)]


def inspirations(db: ProgramDatabase, parent: Program, island: int, count: int, rng: random.Random, *,
                 elite_ratio: float, exclude: Collection[str] = ()) -> list[Program]:
    """Up to ``count`` programs of island ``island`` for the crossover prompt, none of them the parent
    or in ``exclude`` (the top and diverse programs already shown), in OpenEvolve's order of preference:

    1. the island's best program;
    2. the island's ``max(1, int(count * elite_ratio))`` fittest programs;
    3. owners of grid cells near the parent's (each coordinate moved by -2..2) that live on the
       island, up to 3 tries per missing program;
    4. programs of the island drawn uniformly.
    """
    if count <= 0:
        return []
    members = db.island(island)
    taken = {parent.id, *exclude}
    chosen: list[Program] = []

    def take(program: Program | None) -> None:
        if (program is not None and program.id not in taken and program.island == island
                and len(chosen) < count):
            chosen.append(program)
            taken.add(program.id)

    take(db.best(island))
    for program in ranked(members)[:max(1, int(count * elite_ratio))]:
        take(program)
    if len(chosen) < count and parent.coords:
        bins = db.config.params.feature_bins
        for _ in range(3 * (count - len(chosen))):
            cell = tuple(max(0, min(bins - 1, c + rng.randint(-2, 2))) for c in parent.coords)
            take(db.owner(cell))
            if len(chosen) >= count:
                break
    if len(chosen) < count:
        rest = [p for p in members if p.id not in taken]
        for program in rng.sample(rest, min(count - len(chosen), len(rest))):
            take(program)
    return chosen
