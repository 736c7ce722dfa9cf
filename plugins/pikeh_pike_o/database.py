"""PIKE-O's program database: islands, one MAP-Elites grid, an elite archive, migration.

As PIKE's OpenEvolve fork (0.2.8) keeps it in its code (where that differs from the paper's prose,
the code's behaviour is the one kept here):

- Every program lives on one island. One MAP-Elites grid spans the whole database: a new program
  takes its cell (its feature coordinates) if the cell is empty or it is strictly fitter than the
  cell's owner. A displaced owner stays in the database and on its island; only its place in the grid
  moves, and its archive slot, if it had one, goes to the newcomer.
- The archive takes any program while it has room (the reference too, unless ``exclude_reference``,
  PIKE's later change and our default); when full, a newcomer replaces the least fit member if
  strictly fitter.
- Past ``population_size`` programs, the lowest-fitness programs are removed first (earlier first on
  ties) when a program is added; the program just added and the best program before it are never
  removed (``protect_new``; without it, ours: only the best is protected, so a failed newcomer that is
  the unique lowest removes itself).
- An empty island gets, at its first draw, a fresh copy of the best program (``seed_island``), which
  is the parent; the copy joins the island only, never the grid or the archive.
- Migration (``migration_rule = "pike"``): a round-robin island pointer moves every
  ``max(1, max_iterations // (islands * 10))`` added children; each added child bumps the pointed
  island's generation counter, and a migration is due when the largest counter has moved
  ``migration_interval`` past its value at the last migration (300 iterations, 3 islands, interval
  50: after the 130th and the 280th child). Islands are visited in order; each island's fittest
  ``max(1, int(size * migration_rate))`` programs (copies that arrived earlier included) are copied to
  both neighbouring islands unless they are themselves migrants; a program has at most one copy per
  target island. Copies join the island only, never the grid or the archive, and no population limit
  is applied until the next program is added. ``migration_rule = "next"`` (ours): every
  ``migration_interval`` added children, the fittest natives go to the next island only, code already
  on the target island is skipped, and the population limit is applied at once.

Fitness is 1 / runtime in ms for a correct program, 0 otherwise. Ties are broken by insertion order,
never by anything a resumed run could see differently; the diversity feature's sample comes from a
``random.Random`` the search seeds from the task's rng.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from pike_harness.api import EvalResult

from .config import PikeOConfig
from .features import FeatureSpace

REFERENCE_ID = "reference"


def fitness_of(result: EvalResult | None) -> float:
    """1 / runtime in milliseconds for a correct program, else 0 (PIKE-O's fitness)."""
    if result is None or not result.is_correct or not result.runtime_ms or result.runtime_ms <= 0:
        return 0.0
    return 1.0 / result.runtime_ms


@dataclass
class Program:
    """A program in the database. ``key`` is the attempt key that produced it (the original's, for a
    migrant copy), None for the task's reference; ``id`` is unique in the database."""

    id: str
    key: str | None
    code: str
    result: EvalResult | None
    fitness: float
    island: int
    iteration: int | None
    order: int
    coords: tuple[int, ...] = ()
    is_reference: bool = False
    migrant: bool = False
    parent_fitness: float | None = None  # for the crossover prompt's "previous attempts" outcome

    @property
    def category(self) -> str:
        return self.result.category if self.result is not None else "unknown"

    @property
    def label(self) -> str:
        return self.key or REFERENCE_ID


def ranked(programs: Iterable[Program]) -> list[Program]:
    """Fittest first; equal fitness in insertion order."""
    return sorted(programs, key=lambda p: (-p.fitness, p.order))


@dataclass
class Migration:
    """One migration: which program was copied to which island, under which id."""

    number: int
    moves: list[tuple[str, str, int]] = field(default_factory=list)  # (source id, copy id, target island)


class ProgramDatabase:
    """The population of one task's search. Pure bookkeeping and no I/O; its only randomness is the
    diversity feature's sample, drawn from ``rng``."""

    def __init__(self, config: PikeOConfig, rng: random.Random | None = None, *, max_iterations: int = 300):
        self.config = config
        self.features = FeatureSpace(bins=config.params.feature_bins, rng=rng or random.Random(0))
        self.programs: dict[str, Program] = {}
        self.islands: list[list[str]] = [[] for _ in range(config.params.num_islands)]
        self.grid: dict[tuple[int, ...], str] = {}
        self.archive: list[str] = []
        self.added = 0  # programs added by iterations
        self.last_migration = 0  # ``next`` rule: ``added`` at the last migration; ``pike``: the largest counter
        # PIKE's migration clock: a pointer that moves every ``pointer_period`` added children and the
        # generation counter of each island, bumped for the island the pointer is on.
        self.pointer_period = max(1, max_iterations // (config.params.num_islands * 10))
        self.pointer = 0
        self.pointer_count = 0
        self.generations = [0] * config.params.num_islands
        self.best_id: str | None = None
        self.seeded = 0
        self.migrations: list[Migration] = []
        self._order = 0

    # -- adding programs ----------------------------------------------------------------------
    def add_initial(self, code: str, result: EvalResult | None) -> Program:
        """The task's reference, on island 0."""
        program = self._new(REFERENCE_ID, None, code, result, 0, None, is_reference=True)
        self._place(program)
        return program

    def seed_island(self, island: int) -> Program | None:
        """PIKE's start of an empty island: a fresh copy of the best program, placed on the island only
        (not the grid, not the archive), to be the draw's parent. None while the database is empty."""
        best = self.best()
        if best is None:
            return None
        self.seeded += 1
        copy = self._new(f"{best.id}@s{self.seeded}i{island}", best.key, best.code, best.result, island,
                         best.iteration, is_reference=best.is_reference)
        copy.coords = best.coords
        self.programs[copy.id] = copy
        self.islands[island].append(copy.id)
        return copy

    def add_child(self, key: str, code: str, result: EvalResult | None, island: int, iteration: int, *,
                  parent_fitness: float | None = None) -> Program:
        """The program an iteration ended with (the fixed one, if fixes were needed), on ``island``
        (its parent's island)."""
        program = self._new(key, key, code, result, island % len(self.islands), iteration)
        program.parent_fitness = parent_fitness
        self._place(program)
        self.added += 1
        if self.pointer_count >= self.pointer_period:
            self.pointer = (self.pointer + 1) % len(self.islands)
            self.pointer_count = 0
        self.pointer_count += 1
        self.generations[self.pointer] += 1
        return program

    def _new(self, program_id: str, key: str | None, code: str, result: EvalResult | None, island: int,
             iteration: int | None, *, is_reference: bool = False, migrant: bool = False) -> Program:
        if program_id in self.programs:
            raise ValueError(f"program {program_id!r} is already in the database")
        self._order += 1
        return Program(program_id, key, code, result, fitness_of(result), island, iteration, self._order,
                       is_reference=is_reference, migrant=migrant)

    def _place(self, program: Program) -> None:
        others = [p.code for p in self.programs.values()]
        program.coords = self.features.coords(program.code, others)
        self.programs[program.id] = program
        self.islands[program.island].append(program.id)
        owner_id = self.grid.get(program.coords)
        if owner_id is None:
            self.grid[program.coords] = program.id
        elif program.fitness > self.programs[owner_id].fitness:
            self.grid[program.coords] = program.id
            if owner_id in self.archive and self._archivable(program):
                self.archive[self.archive.index(owner_id)] = program.id
        self._update_archive(program)
        self._enforce_population_limit(newcomer=program.id)
        if self.best_id is None or program.fitness > self.programs[self.best_id].fitness:
            self.best_id = program.id

    def _archivable(self, program: Program) -> bool:
        return not (program.is_reference and self.config.params.exclude_reference)

    def _update_archive(self, program: Program) -> None:
        if not self._archivable(program) or program.id in self.archive:
            return
        if len(self.archive) < self.config.params.archive_size:
            self.archive.append(program.id)
            return
        worst = min(self.archived(), key=lambda p: (p.fitness, p.order))
        if program.fitness > worst.fitness:
            self.archive[self.archive.index(worst.id)] = program.id

    def _enforce_population_limit(self, newcomer: str | None = None) -> None:
        """Remove the lowest-fitness programs past ``population_size``. PIKE protects the best program
        as it stood before the newcomer, and the newcomer itself; ours (``protect_new`` off) only the
        best, newcomer included."""
        excess = len(self.programs) - self.config.params.population_size
        if excess <= 0:
            return
        if self.config.protect_new:
            protected = {self.best_id, newcomer}
        else:
            best = self.best()
            protected = {best.id if best else None}
        candidates = sorted((p for p in self.programs.values() if p.id not in protected),
                            key=lambda p: (p.fitness, p.order))
        for program in candidates[:excess]:
            self._remove(program.id)

    def _remove(self, program_id: str) -> None:
        program = self.programs.pop(program_id)
        for cell in [cell for cell, owner in self.grid.items() if owner == program_id]:
            del self.grid[cell]
        if program_id in self.islands[program.island]:
            self.islands[program.island].remove(program_id)
        if program_id in self.archive:
            self.archive.remove(program_id)

    # -- reading -------------------------------------------------------------------------------
    def island(self, k: int) -> list[Program]:
        """Island ``k``'s programs in insertion order."""
        return [self.programs[pid] for pid in self.islands[k]]

    def archived(self) -> list[Program]:
        return [self.programs[pid] for pid in self.archive]

    def all(self) -> list[Program]:
        return list(self.programs.values())

    def best(self, island: int | None = None) -> Program | None:
        """The fittest program (of ``island``, or of the database: the tracked best, which only an added
        program that is strictly fitter replaces, as in PIKE)."""
        if island is None and self.best_id in self.programs:
            return self.programs[self.best_id]
        pool = self.all() if island is None else self.island(island)
        return ranked(pool)[0] if pool else None

    def reference(self) -> Program | None:
        return self.programs.get(REFERENCE_ID)

    def owner(self, coords: tuple[int, ...]) -> Program | None:
        pid = self.grid.get(coords)
        return self.programs[pid] if pid is not None else None

    def recent(self, island: int, count: int) -> list[Program]:
        """The island's ``count`` most recently added programs, oldest first."""
        return self.island(island)[-count:] if count > 0 else []

    # -- migration -----------------------------------------------------------------------------
    def should_migrate(self) -> bool:
        if len(self.islands) < 2:
            return False
        if self.config.migration_rule == "next":
            return self.added - self.last_migration >= self.config.params.migration_interval
        return max(self.generations) - self.last_migration >= self.config.params.migration_interval

    def migrate(self) -> Migration:
        """Copy each island's fittest programs to its neighbours (see the module docstring for the rule)."""
        migration = Migration(len(self.migrations) + 1)
        if self.config.migration_rule == "next":
            self._migrate_next(migration)
            self._enforce_population_limit()
            self.last_migration = self.added
        else:
            self._migrate_pike(migration)
            self.last_migration = max(self.generations)
        self.migrations.append(migration)
        return migration

    def _migrate_pike(self, migration: Migration) -> None:
        """PIKE's: islands in order, copies landing at once (a later island ranks them with its own);
        the top ``max(1, int(size * rate))`` are taken and the migrants among them skipped."""
        n = len(self.islands)
        for k in range(n):
            members = ranked(self.island(k))
            count = max(1, int(len(members) * self.config.params.migration_rate))
            for source in members[:count]:
                if source.migrant:
                    continue
                for target in dict.fromkeys([(k + 1) % n, (k - 1) % n]):
                    self._copy(source, f"{source.id}@m{target}", target, migration)

    def _migrate_next(self, migration: Migration) -> None:
        """Ours: natives only, chosen on every island before any copy lands, to the next island, code
        already there skipped."""
        n = len(self.islands)
        planned: list[tuple[Program, int]] = []
        for k in range(n):
            natives = ranked(p for p in self.island(k) if not p.migrant)
            count = max(1, int(len(natives) * self.config.params.migration_rate)) if natives else 0
            planned.extend((program, (k + 1) % n) for program in natives[:count])
        for source, target in planned:
            if not any(p.code == source.code for p in self.island(target)):
                self._copy(source, f"{source.id}@m{migration.number}i{target}", target, migration)

    def _copy(self, source: Program, copy_id: str, target: int, migration: Migration) -> None:
        if copy_id in self.programs:
            return  # PIKE's copy ids are per (source, target): a second copy would replace the first
        copy = self._new(copy_id, source.key, source.code, source.result, target, source.iteration,
                         is_reference=source.is_reference, migrant=True)
        copy.coords = source.coords
        self.programs[copy.id] = copy
        self.islands[target].append(copy.id)
        migration.moves.append((source.id, copy.id, target))

    # -- summaries -----------------------------------------------------------------------------
    def summary(self) -> str:
        best = self.best()
        sizes = "/".join(str(len(island)) for island in self.islands)
        best_text = f"{best.fitness:.4f} ({best.label})" if best else "-"
        return (f"{len(self.programs)} programs (islands {sizes}), archive {len(self.archive)}, "
                f"best fitness {best_text}")
