"""PIKE-O's program database, as PIKE's OpenEvolve fork keeps it: one MAP-Elites grid, displaced
programs staying, archive, population limit, seeded islands, migration to both neighbours."""

from __future__ import annotations

import random

import pytest
from pike_o_helpers import REFERENCE_CODE, bad, code, database, ok
from pikeh_pike_o.database import REFERENCE_ID, fitness_of
from pikeh_pike_o.features import FeatureSpace, code_difference

# -- fitness and features ---------------------------------------------------------------------------


def test_fitness_is_one_over_runtime_and_zero_for_any_failure():
    assert fitness_of(ok(4.0)) == 0.25
    assert fitness_of(ok(0.5)) == 2.0
    for category in ("compile_error", "runtime_error", "timeout", "incorrect", "rejected"):
        assert fitness_of(bad(category)) == 0.0
    assert fitness_of(None) == 0.0


def test_complexity_is_min_max_scaled_code_length_in_bins():
    space = FeatureSpace(bins=10)
    assert space.coords("x" * 100, [])[0] == 5  # one value seen: the middle bin
    assert space.coords("x" * 200, [])[0] == 9  # the new maximum
    assert space.coords("x" * 100, [])[0] == 0  # now the minimum
    assert space.coords("x" * 150, [])[0] == 5
    assert space.coords("x" * 1100, [])[0] == 9
    assert space.coords("x" * 200, [])[0] == 1  # the range stretched: 100/1000 of the way


def test_diversity_is_openevolves_length_line_and_character_set_heuristic():
    assert code_difference("abc", "abc") == 0.0
    # 10 characters longer (1.0), 1 more line (10.0), 2 new characters "\n" and "x" (1.0)
    assert code_difference("abc", "abc\nxxxxxxxxx") == pytest.approx(1.0 + 10.0 + 1.0)
    space = FeatureSpace(bins=4)
    assert space.diversity("a", []) is None
    assert space.coords("a", [])[1] == 0  # nothing to compare with yet
    assert space.diversity("ab", ["a", "abc"]) == pytest.approx((0.6 + 0.6) / 2)


def test_diversity_samples_up_to_20_other_programs_from_its_rng():
    others = [f"x{'y' * i}" for i in range(50)]
    draws = {FeatureSpace(bins=10, rng=random.Random(seed)).diversity("z", others) for seed in range(5)}
    assert len(draws) > 1  # a fresh sample of 20 each time
    same = [FeatureSpace(bins=10, rng=random.Random(3)).diversity("z", others) for _ in range(2)]
    assert same[0] == same[1]  # a seed gives the same sample
    small = FeatureSpace(bins=10, rng=random.Random(0))
    assert small.diversity("z", others[:20]) == sum(code_difference("z", o) for o in others[:20]) / 20


# -- one grid, islands, archive ---------------------------------------------------------------------


def test_the_reference_is_in_the_database_but_not_archived_unless_asked():
    db = database(archive_size=2, feature_bins=1)
    ref = db.add_initial(REFERENCE_CODE, ok(2.0))
    assert ref.id == REFERENCE_ID and ref.is_reference and ref.key is None and ref.island == 0
    assert db.island(0) == [ref] and db.archive == []
    child = db.add_child("it0000", code("a"), bad(), 0, 0)
    assert db.archive == ["it0000"]  # archived although it failed: the archive has room
    assert db.best() is ref and child.fitness == 0.0
    with_reference = database(archive_size=2, feature_bins=1, exclude_reference=False)
    with_reference.add_initial(REFERENCE_CODE, ok(2.0))
    assert with_reference.archive == [REFERENCE_ID]


def test_one_grid_spans_every_island_and_a_displaced_owner_stays():
    db = database(feature_bins=1, archive_size=5, num_islands=3)  # one cell for the whole database
    db.add_initial(REFERENCE_CODE, ok(2.0))
    db.add_child("it0000", code("a"), ok(4.0), 1, 0)  # slower than the reference: joins island 1, owns nothing
    assert [p.id for p in db.island(1)] == ["it0000"]
    assert db.owner((0, 0)).id == REFERENCE_ID
    db.add_child("it0001", code("b"), ok(1.0), 2, 1)  # faster, on island 2: takes the one cell
    assert db.owner((0, 0)).id == "it0001"
    assert REFERENCE_ID in db.programs and [p.id for p in db.island(0)] == [REFERENCE_ID]  # stays
    db.add_child("it0002", code("c"), ok(0.5), 0, 2)  # displaces it0001 and takes its archive slot
    assert db.owner((0, 0)).id == "it0002" and "it0001" in db.programs
    assert db.archive == ["it0000", "it0002"]  # the archive slot moved with the cell
    assert [p.id for p in db.island(2)] == ["it0001"]


def test_equal_fitness_keeps_the_older_cell_owner():
    db = database(feature_bins=1)
    db.add_initial(REFERENCE_CODE, ok(2.0))
    db.add_child("it0000", code("a"), ok(2.0), 0, 0)
    assert db.owner((0, 0)).id == REFERENCE_ID
    assert db.best().id == REFERENCE_ID  # ties go to the earlier program


def test_full_archive_replaces_its_least_fit_member_only_for_a_strictly_fitter_program():
    db = database(archive_size=2, feature_bins=10, population_size=100)
    db.add_initial(REFERENCE_CODE, ok(1.0))
    db.add_child("it0000", code("a", 10), ok(4.0), 0, 0)
    db.add_child("it0001", code("b", 40), ok(2.0), 0, 1)
    assert db.archive == ["it0000", "it0001"]
    db.add_child("it0002", code("c", 80), ok(4.0), 0, 2)  # as fit as the worst: no change
    assert db.archive == ["it0000", "it0001"]
    db.add_child("it0003", code("d", 120), ok(3.0), 0, 3)  # fitter than it0000 (0.25)
    assert sorted(db.archive) == ["it0001", "it0003"]
    assert all(not p.is_reference for p in db.archived())


def test_population_limit_removes_the_lowest_fitness_first_never_the_newcomer_nor_the_previous_best():
    """PIKE's rule: the program just added and the best before it are protected, so a failed newcomer
    evicts the lowest-fitness other program instead of itself."""
    db = database(population_size=3, feature_bins=1, archive_size=10)
    db.add_initial(REFERENCE_CODE, ok(1.0))  # the best
    db.add_child("it0000", code("a"), ok(5.0), 0, 0)
    db.add_child("it0001", code("b"), ok(3.0), 0, 1)
    db.add_child("it0002", code("c"), bad(), 0, 2)  # 4 programs: the failed newcomer stays, it0000 goes
    assert set(db.programs) == {REFERENCE_ID, "it0001", "it0002"}
    db.add_child("it0003", code("d"), bad(), 0, 3)  # another failure: the older failed one goes
    assert set(db.programs) == {REFERENCE_ID, "it0001", "it0003"}
    db.add_child("it0004", code("e"), ok(0.5), 0, 4)  # the new best; the failed it0003 is the lowest
    assert set(db.programs) == {REFERENCE_ID, "it0001", "it0004"} and db.best().id == "it0004"
    db.add_child("it0005", code("f"), ok(0.4), 0, 5)  # it0001 (1/3) is the lowest; it0004 was the best
    assert set(db.programs) == {REFERENCE_ID, "it0004", "it0005"} and db.best().id == "it0005"


def test_without_protect_new_a_failed_newcomer_evicts_itself():
    db = database(population_size=3, feature_bins=1, archive_size=10, protect_new=False)
    db.add_initial(REFERENCE_CODE, ok(1.0))
    db.add_child("it0000", code("a"), ok(5.0), 0, 0)
    db.add_child("it0001", code("b"), ok(3.0), 0, 1)
    db.add_child("it0002", code("c"), bad(), 0, 2)
    assert set(db.programs) == {REFERENCE_ID, "it0000", "it0001"}
    db.add_child("it0003", code("d"), ok(10.0), 0, 3)  # fitness 0.1 < it0000's 0.2: it goes at once
    assert set(db.programs) == {REFERENCE_ID, "it0000", "it0001"}


# -- migration ----------------------------------------------------------------------------------------


def filled(num_islands: int = 3, per_island: int = 4, **overrides):
    db = database(num_islands=num_islands, feature_bins=10, population_size=100, archive_size=50,
                  migration_interval=per_island * num_islands, migration_rate=0.5, **overrides)
    db.add_initial(REFERENCE_CODE, ok(50.0))
    iteration = 0
    for _ in range(per_island):
        for island in range(num_islands):
            db.add_child(f"it{iteration:04d}", code(f"p{iteration}", 7 * iteration), ok(1.0 + iteration), island,
                         iteration)
            iteration += 1
    return db


def test_pikes_migration_clock_is_a_round_robin_pointer_over_island_generation_counters():
    """300 iterations over 3 islands: the pointer moves every 300 // 30 = 10 added children, so island
    0's counter reaches 50 at the 130th child (10 per 30-child cycle, 4 cycles + 10) and 100 at the
    280th: two migrations in the run, whatever island the children joined."""
    db = database(num_islands=3, migration_interval=50, feature_bins=10, population_size=1000, archive_size=10)
    db.add_initial(REFERENCE_CODE, ok(5.0))
    due = []
    for i in range(300):
        db.add_child(f"it{i:04d}", code(f"p{i}"), ok(1.0 + i % 7), 0, i)  # every child on island 0
        if db.should_migrate():
            due.append(db.added)
            db.migrate()
    assert due == [130, 280]
    assert db.generations == [100, 100, 100] and db.last_migration == 100
    assert not database(num_islands=1, migration_interval=1).should_migrate()


def test_ours_next_migration_is_due_every_interval_added_children():
    db = database(num_islands=3, migration_interval=3, feature_bins=10, migration_rule="next")
    db.add_initial(REFERENCE_CODE, ok(5.0))
    db.add_child("it0000", code("a", 1), ok(1.0), 0, 0)
    db.add_child("it0001", code("b", 2), ok(1.0), 0, 1)
    assert db.added == 2 and not db.should_migrate()
    db.add_child("it0002", code("c", 3), ok(1.0), 0, 2)
    assert db.should_migrate()
    db.migrate()
    assert db.last_migration == 3 and not db.should_migrate()


def test_pikes_migration_copies_to_both_neighbours_in_island_order_outside_the_grid_and_archive():
    db = filled()
    grid, archive = dict(db.grid), list(db.archive)
    before = {k: [p.id for p in db.island(k)] for k in range(3)}
    size_before = len(db.programs)
    migration = db.migrate()
    # Island 0 (reference, it0000/3/6/9): int(5 * 0.5) = 2 migrate, it0000 and it0003, to islands 1
    # and 2. Island 1 then holds it0001/4/7/10 and those 2 copies: int(6 * 0.5) = 3 from the top, the
    # copies it0000 and it0003 (migrants: skipped) and it0001, to islands 2 and 0. Island 2 holds its
    # 4, the 4 copies from islands 0 and 1: the top 4 are it0000's copy, it0001's copy, it0002 and
    # it0003's copy: only it0002 migrates, to islands 0 and 1.
    moved = sorted((src, target) for src, _, target in migration.moves)
    assert moved == sorted([("it0000", 1), ("it0000", 2), ("it0003", 1), ("it0003", 2), ("it0001", 2),
                            ("it0001", 0), ("it0002", 0), ("it0002", 1)])
    for source, copy_id, target in migration.moves:
        copy = db.programs[copy_id]
        assert copy.migrant and copy.island == target and copy.key == source
        assert copy.code == db.programs[source].code and copy.fitness == db.programs[source].fitness
        assert copy_id in [p.id for p in db.island(target)]
    assert db.grid == grid and db.archive == archive  # copies enter neither
    assert len(db.programs) == size_before + 8  # no population limit until the next program is added
    for k in range(3):  # the natives stayed where they were
        assert before[k] == [p.id for p in db.island(k) if not p.migrant]
    again = db.migrate()  # the same natives on top: one copy per (program, target island) at most
    assert again.moves == [] and len(db.programs) == size_before + 8


def test_ours_next_migration_copies_natives_to_the_next_island_skipping_duplicate_code():
    db = filled(migration_rule="next")
    migration = db.migrate()
    moved = sorted((src, target) for src, _, target in migration.moves)
    assert moved == sorted([("it0000", 1), ("it0003", 1), ("it0001", 2), ("it0004", 2),
                            ("it0002", 0), ("it0005", 0)])
    assert all(db.programs[c].migrant for _, c, _ in migration.moves)
    assert db.migrate().moves == []  # every native top program's code is already on the next island


def test_a_migrating_reference_stays_unarchived():
    db = database(num_islands=2, migration_interval=1, migration_rate=0.1, feature_bins=10)
    db.add_initial(REFERENCE_CODE, ok(0.1))  # the fittest program of island 0
    db.add_child("it0001", code("b", 30), ok(3.0), 1, 1)
    migration = db.migrate()
    # Island 1 then ranks the reference's copy first: a migrant, so it sends nothing (PIKE's rule).
    assert sorted((src, target) for src, _, target in migration.moves) == [(REFERENCE_ID, 1)]
    copy = next(db.programs[c] for src, c, _ in migration.moves if src == REFERENCE_ID)
    assert copy.is_reference and copy.key is None and copy.id not in db.archive


def test_an_empty_island_is_seeded_with_a_copy_of_the_best_outside_the_grid_and_archive():
    db = database(num_islands=3, feature_bins=10)
    db.add_initial(REFERENCE_CODE, ok(2.0))
    db.add_child("it0000", code("a", 5), ok(1.0), 0, 0)
    grid, archive = dict(db.grid), list(db.archive)
    seed = db.seed_island(2)
    assert seed.code == db.programs["it0000"].code and seed.key == "it0000" and seed.fitness == 1.0
    assert [p.id for p in db.island(2)] == [seed.id] and not seed.migrant
    assert db.grid == grid and db.archive == archive and db.best().id == "it0000"
