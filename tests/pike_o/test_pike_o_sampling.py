"""Parent draws, top programs and inspirations, over many draws where the rule is statistical."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from pike_o_helpers import REFERENCE_CODE, bad, code, database, ok
from pikeh_pike_o.database import REFERENCE_ID
from pikeh_pike_o.sampling import (
    EXPLOIT,
    EXPLORE,
    RANDOM,
    diverse_programs,
    inspirations,
    sample_parent,
    top_programs,
)

DRAWS = 20_000


def three_islands():
    """The reference on island 0 and four children per island, two of island 0's archived."""
    db = database(num_islands=3, archive_size=3, population_size=100, feature_bins=10)
    db.add_initial(REFERENCE_CODE, ok(0.1))  # the fittest program of all: still never archived
    for i in range(12):
        db.add_child(f"it{i:04d}", code(f"p{i}", 9 * i), ok(1.0 + i), i % 3, i)
    return db


def shares(counter: Counter, total: int) -> dict:
    return {k: v / total for k, v in counter.items()}


def test_the_split_is_explore_02_exploit_07_random_01_over_many_draws():
    db = three_islands()
    rng = random.Random(5)
    modes: Counter[str] = Counter()
    origins: Counter[tuple[str, str]] = Counter()
    for _ in range(DRAWS):
        draw = sample_parent(db, 1, rng, exploration=0.2, exploitation=0.7)
        modes[draw.mode] += 1
        origins[draw.mode, draw.pool] += 1
        if draw.mode == EXPLORE:
            assert draw.parent.island == 1
        elif draw.mode == EXPLOIT:
            assert draw.parent.id in db.archive and not draw.parent.is_reference
        if draw.parent.is_reference:
            assert draw.mode == RANDOM  # island 1 does not hold it, the archive never does
    got = shares(modes, DRAWS)
    # Binomial standard deviation at n=20000 is at most 0.0036: 0.015 is over 4 sigma.
    assert got[EXPLORE] == pytest.approx(0.2, abs=0.015)
    assert got[EXPLOIT] == pytest.approx(0.7, abs=0.015)
    assert got[RANDOM] == pytest.approx(0.1, abs=0.015)
    # The archive holds it0000 (island 0), it0001 (island 1) and it0002 (island 2): exploitation on
    # island 1 always takes the island's own archive member.
    assert set(db.archive) == {"it0000", "it0001", "it0002"}
    assert origins[EXPLOIT, "archive-island"] == modes[EXPLOIT]


def test_draws_within_a_pool_are_uniform():
    db = three_islands()
    rng = random.Random(11)
    explore = Counter(sample_parent(db, 0, rng, exploration=1.0, exploitation=0.0).parent.id for _ in range(DRAWS))
    assert set(explore) == {REFERENCE_ID, "it0000", "it0003", "it0006", "it0009"}
    assert all(v / DRAWS == pytest.approx(0.2, abs=0.02) for v in explore.values())
    anywhere = Counter(sample_parent(db, 0, rng, exploration=0.0, exploitation=0.0).parent.id for _ in range(DRAWS))
    assert len(anywhere) == 13 and all(v / DRAWS == pytest.approx(1 / 13, abs=0.015) for v in anywhere.values())


def test_exploitation_only_never_draws_the_reference_once_anything_else_exists():
    db = database(num_islands=1, archive_size=4, feature_bins=10)
    db.add_initial(REFERENCE_CODE, ok(0.01))  # far faster than anything the search finds
    rng = random.Random(1)
    first = sample_parent(db, 0, rng, exploration=0.0, exploitation=1.0)
    # Nothing but the reference: an empty archive falls back to the exploration pool.
    assert (first.parent.id, first.mode, first.pool) == (REFERENCE_ID, EXPLOIT, "island")
    db.add_child("it0000", code("a"), bad(), 0, 0)
    db.add_child("it0001", code("b", 30), ok(5.0), 0, 1)
    parents = Counter(sample_parent(db, 0, rng, exploration=0.0, exploitation=1.0).parent.id
                      for _ in range(2000))
    assert set(parents) == {"it0000", "it0001"}


def test_an_empty_island_is_seeded_with_a_copy_of_the_best_that_becomes_the_parent():
    db = database(num_islands=3)
    db.add_initial(REFERENCE_CODE, ok(1.0))
    draw = sample_parent(db, 2, random.Random(0), exploration=1.0, exploitation=0.0)
    assert (draw.mode, draw.pool, draw.parent.island) == (EXPLORE, "seeded", 2)
    assert draw.parent.is_reference and [p.id for p in db.island(2)] == [draw.parent.id]
    # An exploitation draw with nothing archived falls back to exploring, and so seeds too (PIKE's fork
    # from the commit that keeps the reference out of the archive).
    draw = sample_parent(db, 1, random.Random(0), exploration=0.0, exploitation=1.0)
    assert (draw.mode, draw.pool, draw.parent.island) == ("exploit", "seeded", 1)


def test_with_empty_island_whole_an_empty_island_draws_from_every_program():
    db = database(num_islands=3, empty_island="whole")
    db.add_initial(REFERENCE_CODE, ok(1.0))
    draw = sample_parent(db, 2, random.Random(0), exploration=1.0, exploitation=0.0)
    assert (draw.parent.id, draw.mode, draw.pool) == (REFERENCE_ID, EXPLORE, "all")
    assert db.island(2) == []


def test_top_programs_are_the_islands_fittest_whatever_they_are():
    db = three_islands()
    assert [p.id for p in top_programs(db, 0, 3)] == [REFERENCE_ID, "it0000", "it0003"]
    assert [p.id for p in top_programs(db, 2, 10)] == ["it0002", "it0005", "it0008", "it0011"]
    assert top_programs(database(num_islands=2), 1, 3) == []


def test_diverse_programs_come_from_the_island_beyond_the_top_programs():
    db = three_islands()
    rng = random.Random(2)
    seen = Counter()
    for _ in range(200):
        chosen = diverse_programs(db, 0, 2, rng, exclude={REFERENCE_ID, "it0000"})
        assert len(chosen) == 2 and all(p.island == 0 and p.id not in (REFERENCE_ID, "it0000") for p in chosen)
        seen.update(p.id for p in chosen)
    assert set(seen) == {"it0003", "it0006", "it0009"}
    assert diverse_programs(db, 0, 0, rng) == []


def test_inspirations_come_from_the_island_and_never_repeat_the_parent_or_the_top_programs():
    db = three_islands()
    rng = random.Random(3)
    parent = db.programs["it0004"]
    for _ in range(300):
        tops = [p for p in top_programs(db, 1, 2) if p.id != parent.id][:1]
        chosen = inspirations(db, parent, 1, 2, rng, elite_ratio=0.2, exclude={p.id for p in tops})
        ids = [p.id for p in chosen]
        assert len(ids) == 2 == len(set(ids))
        assert parent.id not in ids and tops[0].id not in ids
        assert all(db.programs[i].island == 1 for i in ids)
        # The island's best and fittest (it0001) is already a top program: the two left are taken.
        assert set(ids) == {"it0007", "it0010"}
    assert inspirations(db, parent, 1, 0, rng, elite_ratio=0.2) == []
    everything = inspirations(db, parent, 1, 10, rng, elite_ratio=0.2)
    assert sorted(p.id for p in everything) == ["it0001", "it0007", "it0010"]


def test_inspirations_follow_openevolve_preference_best_then_elite_then_nearby_then_random():
    db = three_islands()
    rng = random.Random(8)
    parent = db.programs["it0009"]  # island 0's least fit program
    picks = Counter()
    for _ in range(500):
        ids = [p.id for p in inspirations(db, parent, 0, 3, rng, elite_ratio=0.7)]
        # The island's best, then its int(3 * 0.7) = 2 fittest (the best again, and it0000).
        assert ids[:2] == [REFERENCE_ID, "it0000"]
        picks[ids[2]] += 1
    assert set(picks) <= {"it0003", "it0006"}
