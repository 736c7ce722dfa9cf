"""PIKE-O's program database: islands, a MAP-Elites grid per island, an elite archive, migration.

OpenEvolve's population model with PIKE's rule that the task's reference program (the initial program)
is never archived, so it can never be drawn as an exploitation parent.

- Every program lives on one island. A new program lands in its island's grid cell (its feature
  coordinates) if the cell is empty or the program is strictly fitter than the cell's owner; a
  displaced owner leaves its island and the database (it owns nothing any more), and hands its archive
  slot, if it had one, to the newcomer. A newcomer that is not fitter still joins the island.
- The archive takes any non-reference program while it has room; when full, a newcomer replaces the
  least fit member if strictly fitter.
- Past ``population_size`` programs, the least fit are removed, programs that own no grid cell
  first; the best program and the newcomer are never removed.
- Islands count generations (programs added by iterations). When the busiest island has gained
  ``migration_interval`` since the last migration, each island copies its fittest
  ``max(1, int(size * migration_rate))`` programs (copies never migrate again) to both ring
  neighbours, skipping a neighbour that already holds the same code.

Fitness is 1 / runtime in ms for a correct program, 0 otherwise. Every tie is broken by insertion
order (earlier first), never by anything a resumed run could see differently.
"""

from __future__ import annotations

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
    """The population of one task's search. Pure bookkeeping: no randomness, no I/O."""

    def __init__(self, config: PikeOConfig):
        self.config = config
        self.features = FeatureSpace(bins=config.feature_bins)
        self.programs: dict[str, Program] = {}
        self.islands: list[list[str]] = [[] for _ in range(config.num_islands)]
        self.grids: list[dict[tuple[int, ...], str]] = [{} for _ in range(config.num_islands)]
        self.archive: list[str] = []
        self.generations = [0] * config.num_islands
        self.last_migration_generation = 0
        self.migrations: list[Migration] = []
        self._order = 0

    # -- adding programs ----------------------------------------------------------------------
    def add_initial(self, code: str, result: EvalResult | None) -> Program:
        """The task's reference, on island 0: a parent for exploration and random draws only."""
        program = self._new(REFERENCE_ID, None, code, result, 0, None, is_reference=True)
        self._place(program)
        return program

    def add_child(self, key: str, code: str, result: EvalResult | None, island: int, iteration: int) -> Program:
        """The program an iteration ended with (the fixed one, if fixes were needed), on its island."""
        program = self._new(key, key, code, result, island % len(self.islands), iteration)
        self._place(program)
        self.generations[program.island] += 1
        return program

    def _new(self, program_id: str, key: str | None, code: str, result: EvalResult | None, island: int,
             iteration: int | None, *, is_reference: bool = False, migrant: bool = False) -> Program:
        if program_id in self.programs:
            raise ValueError(f"program {program_id!r} is already in the database")
        self._order += 1
        return Program(program_id, key, code, result, fitness_of(result), island, iteration, self._order,
                       is_reference=is_reference, migrant=migrant)

    def _place(self, program: Program) -> None:
        program.coords = self.features.coords(program.code)
        self.programs[program.id] = program
        k = program.island
        grid = self.grids[k]
        owner_id = grid.get(program.coords)
        if owner_id is None:
            grid[program.coords] = program.id
        elif program.fitness > self.programs[owner_id].fitness:
            grid[program.coords] = program.id
            self._displace(owner_id, program)
        self.islands[k].append(program.id)
        self._update_archive(program)
        self._enforce_population_limit(keep=program.id)

    def _displace(self, owner_id: str, newcomer: Program) -> None:
        """The owner lost its cell: it leaves its island, and the database (it owns nothing now)."""
        if owner_id in self.archive:
            slot = self.archive.index(owner_id)
            if newcomer.is_reference:
                del self.archive[slot]
            else:
                self.archive[slot] = newcomer.id
        self._remove(owner_id)

    def _update_archive(self, program: Program) -> None:
        if program.is_reference or program.id in self.archive:
            return  # PIKE: the reference (or a migrant copy of it) is never archived
        if len(self.archive) < self.config.archive_size:
            self.archive.append(program.id)
            return
        worst = min(self.archived(), key=lambda p: (p.fitness, p.order))
        if program.fitness > worst.fitness:
            self.archive[self.archive.index(worst.id)] = program.id

    def _enforce_population_limit(self, keep: str) -> None:
        excess = len(self.programs) - self.config.population_size
        if excess <= 0:
            return
        best = self.best()
        protected = {keep, best.id if best else None}
        owners = {pid for grid in self.grids for pid in grid.values()}
        candidates = sorted((p for p in self.programs.values() if p.id not in protected),
                            key=lambda p: (p.id in owners, p.fitness, p.order))
        for program in candidates[:excess]:
            self._remove(program.id)

    def _remove(self, program_id: str) -> None:
        program = self.programs.pop(program_id)
        grid = self.grids[program.island]
        for cell in [cell for cell, owner in grid.items() if owner == program_id]:
            del grid[cell]
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

    def owner(self, island: int, coords: tuple[int, ...]) -> Program | None:
        pid = self.grids[island].get(coords)
        return self.programs[pid] if pid is not None else None

    # -- migration -----------------------------------------------------------------------------
    def should_migrate(self) -> bool:
        if len(self.islands) < 2:
            return False
        return max(self.generations) - self.last_migration_generation >= self.config.migration_interval

    def migrate(self) -> Migration:
        """Copy each island's fittest non-migrant programs to both ring neighbours.

        Migrants are chosen from every island before any copy lands, so a copy that has just arrived
        can neither take a migration slot nor displace a program before it had its chance to move.
        """
        migration = Migration(len(self.migrations) + 1)
        n = len(self.islands)
        planned: list[tuple[Program, int]] = []
        for k in range(n):
            natives = ranked(p for p in self.island(k) if not p.migrant)
            count = max(1, int(len(natives) * self.config.migration_rate)) if natives else 0
            for program in natives[:count]:
                for target in dict.fromkeys(((k + 1) % n, (k - 1) % n)):
                    planned.append((program, target))
        for source, target in planned:
            if source.id not in self.programs:
                continue  # displaced by an earlier copy of this migration
            if any(p.code == source.code for p in self.island(target)):
                continue
            copy = self._new(f"{source.id}@m{migration.number}i{target}", source.key, source.code, source.result,
                             target, source.iteration, is_reference=source.is_reference, migrant=True)
            self._place(copy)
            if copy.id in self.programs:
                migration.moves.append((source.id, copy.id, target))
        self.last_migration_generation = max(self.generations)
        self.migrations.append(migration)
        return migration

    # -- summaries -----------------------------------------------------------------------------
    def summary(self) -> str:
        best = self.best()
        sizes = "/".join(str(len(island)) for island in self.islands)
        best_text = f"{best.fitness:.4f} ({best.label})" if best else "-"
        return (f"{len(self.programs)} programs (islands {sizes}), archive {len(self.archive)}, "
                f"best fitness {best_text}")
