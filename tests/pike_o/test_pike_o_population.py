"""PIKE-O's population over a whole 300-query run, against the scripted host (no evaluations).

The paper's PIKE-O configuration without error fixing (``pike-o,noEFA``), so each of the 300 queries is
one iteration and one child and PIKE's migration clock is exact: 3 islands, 20 parallel evaluations
(13 iterations in flight per island), population 25, archive 12, migration interval 50 and rate 0.1.
A quarter of the children fail (fitness 0); the others have distinct runtimes.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from pikeh_pike_o import PikeO, PikeOConfig
from pikeh_pike_o.database import ProgramDatabase

from pike_harness.testing.context import ScriptedContext, correct, failure, make_task

BUDGET = 300


def outcome(key: str):
    if key == "initial":
        return correct(8.0)
    digest = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    if digest % 4 == 0:
        return failure("compile_error")
    return correct(1.0 + digest % 9000 / 1000)


class Watched(PikeO):
    """The real strategy, keeping its database and a snapshot of it after every added child."""

    def new_database(self, ctx):
        self.db = super().new_database(ctx)
        self.after_add: list[tuple[int, list[int], int]] = []  # (children added, island sizes, programs)
        add_child = self.db.add_child

        def watched(*args, **kwargs):
            program = add_child(*args, **kwargs)
            self.after_add.append((self.db.added, [len(i) for i in self.db.islands], len(self.db.programs)))
            self.newest_kept = program.id in self.db.programs
            assert self.newest_kept, "PIKE never removes the program it has just added"
            return program

        self.db.add_child = watched
        return self.db


def run(tmp_path) -> tuple[Watched, ScriptedContext, ProgramDatabase]:
    strategy = Watched(PikeOConfig(preset="pike-o,noEFA"))
    ctx = ScriptedContext(make_task(tmp_path), BUDGET, strategy.overshoot(), default_outcome=outcome)
    strategy.run_task(ctx)
    return strategy, ctx, strategy.db


def test_every_island_grows_from_the_first_batch_and_migrates_at_pikes_trigger(tmp_path):
    strategy, ctx, db = run(tmp_path)
    queries = [q for q in ctx.counted]
    assert len(queries) == BUDGET and db.added == BUDGET

    # The first batch: 13 iterations per island, island 0's first, then 1's, then 2's. The first draw on
    # islands 1 and 2 seeds them with a copy of the best program (the reference, as nothing has
    # finished), so their children join islands 1 and 2: only a random draw (10%) can take a parent from
    # another island, so each island gets at least 9 of its 13 (and island 0 at most 13 + 8).
    first = queries[:39]
    assert [q.meta["island"] for q in first] == [0] * 13 + [1] * 13 + [2] * 13
    seeded = [q for q in first if q.meta["pool"] == "seeded"]
    assert [q.meta["island"] for q in seeded] == [1, 2]
    joined = Counter(q.meta["child_island"] for q in first)
    assert all(joined[k] >= 9 for k in range(3)), joined
    # After the first batch's 39 children the population limit (25) has pruned all islands together,
    # and each still holds a third of it or so (this seed: 9/8/8).
    after_first = strategy.after_add[38]
    assert all(size >= 5 for size in after_first[1]), after_first

    # PIKE's migration clock: the pointer moves every 300 // (3 * 10) = 10 children and bumps that
    # island's generation; island 0's counter reaches 50 at the 130th child and 100 at the 280th.
    migrations = [line for line in ctx.logs if ": migration " in line]
    assert [line.split(" after iteration ")[1].split(":")[0] for line in migrations] == ["129", "279"]
    # The first migration copies each source to both neighbours of its island (this seed: island 0's
    # best to islands 1 and 2; those copies then top islands 1 and 2 and, being migrants, are skipped). By the second the same natives lead, and a program
    # has at most one copy per island, so nothing new moves (this seed).
    first_migration = db.migrations[0]
    sources = {src for src, _, _ in first_migration.moves}
    assert len(db.migrations) == 2 and sources
    for source in sources:
        home = db.programs[source].island
        assert sorted(t for s, _, t in first_migration.moves if s == source) == sorted(
            {(home + 1) % 3, (home - 1) % 3}
        )

    # Pruning as PIKE's: past 25 programs the lowest-fitness others go when a child is added, so right
    # after every add past the 24th child there are exactly 25 programs (seed and migrant copies count
    # and are pruned like any other); the newcomer always stays (checked in Watched).
    for added, sizes, programs in strategy.after_add[24:]:
        assert programs == 25 and sum(sizes) == 25, (added, sizes)
    # Children spread over the islands for the whole run (this seed: 106/104/90; before PIKE's
    # seeding, a run like this one put 212 of 223 children on island 0).
    children = Counter(q.meta["child_island"] for q in queries)
    assert all(children[k] >= 75 for k in range(3)), children
    # Every island keeps a line of its own to the end of the run.
    final = [len(island) for island in db.islands]
    assert all(size >= 3 for size in final), final
    natives = [sum(1 for p in db.island(k) if not p.migrant and "@s" not in p.id) for k in range(3)]
    assert all(n >= 1 for n in natives), natives
