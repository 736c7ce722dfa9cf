"""PIKE-O's program database: islands, one MAP-Elites grid, an elite archive, migration.

As PIKE's OpenEvolve fork (0.2.8) keeps it (shared/specs/pike-o.md, "Corrections"):

- Every program lives on one island. One MAP-Elites grid spans the whole database: a new program
  takes its cell (its feature coordinates) if the cell is empty or it is strictly fitter than the
  cell's owner. A displaced owner stays in the database and on its island; only its place in the grid
  moves, and its archive slot, if it had one, goes to the newcomer.
- The archive takes any program while it has room (the reference too, unless ``exclude_reference``,
  PIKE's later change and our default); when full, a newcomer replaces the least fit member if
  strictly fitter.
- Past ``population_size`` programs, the lowest-fitness programs are removed first (earlier first on
  ties); the best program is never removed.
- Migration, every ``migration_interval`` added iterations: each island's fittest
  ``max(1, int(size * migration_rate))`` programs are copied to the next island (ring); copies join
  the island only, never the grid or the archive, and never migrate again.

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

    def __init__(self, config: PikeOConfig, rng: random.Random | None = None):
        self.config = config
        self.features = FeatureSpace(bins=config.feature_bins, rng=rng or random.Random(0))
        self.programs: dict[str, Program] = {}
        self.islands: list[list[str]] = [[] for _ in range(config.num_islands)]
        self.grid: dict[tuple[int, ...], str] = {}
        self.archive: list[str] = []
        self.added = 0  # programs added by iterations: the migration counter
        self.last_migration = 0
        self.migrations: list[Migration] = []
        self._order = 0

    # -- adding programs ----------------------------------------------------------------------
    def add_initial(self, code: str, result: EvalResult | None) -> Program:
        """The task's reference, on island 0."""
        program = self._new(REFERENCE_ID, None, code, result, 0, None, is_reference=True)
        self._place(program)
        return program

    def add_child(self, key: str, code: str, result: EvalResult | None, island: int, iteration: int) -> Program:
        """The program an iteration ended with (the fixed one, if fixes were needed), on ``island``
        (its parent's island)."""
        program = self._new(key, key, code, result, island % len(self.islands), iteration)
        self._place(program)
        self.added += 1
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
        self._enforce_population_limit()

    def _archivable(self, program: Program) -> bool:
        return not (program.is_reference and self.config.exclude_reference)

    def _update_archive(self, program: Program) -> None:
        if not self._archivable(program) or program.id in self.archive:
            return
        if len(self.archive) < self.config.archive_size:
            self.archive.append(program.id)
            return
        worst = min(self.archived(), key=lambda p: (p.fitness, p.order))
        if program.fitness > worst.fitness:
            self.archive[self.archive.index(worst.id)] = program.id

    def _enforce_population_limit(self) -> None:
        excess = len(self.programs) - self.config.population_size
        if excess <= 0:
            return
        best = self.best()
        candidates = sorted((p for p in self.programs.values() if best is None or p.id != best.id),
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
        return self.added - self.last_migration >= self.config.migration_interval

    def migrate(self) -> Migration:
        """Copy each island's fittest non-migrant programs to the next island.

        Migrants are chosen from every island before any copy lands, so a copy that has just arrived
        cannot take a migration slot. Copies join the island only (not the grid, not the archive).
        """
        migration = Migration(len(self.migrations) + 1)
        n = len(self.islands)
        planned: list[tuple[Program, int]] = []
        for k in range(n):
            natives = ranked(p for p in self.island(k) if not p.migrant)
            count = max(1, int(len(natives) * self.config.migration_rate)) if natives else 0
            planned.extend((program, (k + 1) % n) for program in natives[:count])
        for source, target in planned:
            if any(p.code == source.code for p in self.island(target)):
                continue
            copy = self._new(f"{source.id}@m{migration.number}i{target}", source.key, source.code, source.result,
                             target, source.iteration, is_reference=source.is_reference, migrant=True)
            copy.coords = source.coords
            self.programs[copy.id] = copy
            self.islands[target].append(copy.id)
            migration.moves.append((source.id, copy.id, target))
        self._enforce_population_limit()
        self.last_migration = self.added
        self.migrations.append(migration)
        return migration

    # -- summaries -----------------------------------------------------------------------------
    def summary(self) -> str:
        best = self.best()
        sizes = "/".join(str(len(island)) for island in self.islands)
        best_text = f"{best.fitness:.4f} ({best.label})" if best else "-"
        return (f"{len(self.programs)} programs (islands {sizes}), archive {len(self.archive)}, "
                f"best fitness {best_text}")
