"""PIKE-O's search against the scripted host: many iterations in milliseconds, no evaluations.

The scripted model writes a unique program per query key (``source_key = 'it0007/fix1'``), so every
program a prompt quotes can be traced to the attempt that produced it; verdicts come from a table keyed
by query key; futures resolve out of submission order.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter

import pytest
from pikeh_pike_o import PikeO, PikeOConfig
from pikeh_pike_o.prompts import crossover_sections, format_fitness, is_crossover

from pike_harness.api import prompting
from pike_harness.testing.context import (
    REFERENCE_SOURCE,
    ScriptedContext,
    correct,
    failure,
    make_task,
    program_for,
)

KEY = re.compile(r"source_key = '([^']+)'")
REFERENCE_MS = 8.0


def key_of(program: str) -> str:
    """The attempt key a quoted program came from, or 'reference'."""
    if program.strip() == REFERENCE_SOURCE.strip():
        return "reference"
    match = KEY.search(program)
    assert match, program
    return match.group(1)


def iteration_of(key: str) -> int:
    return int(key[2:6])


def runtime(key: str) -> float:
    """A stable pseudo-random runtime per key, in 1..9 ms."""
    return 1.0 + int(hashlib.sha256(key.encode()).hexdigest()[:6], 16) % 8000 / 1000


def mixed(key: str):
    """About a third of first attempts fail; fixes succeed on their second try."""
    if key == "initial":
        return correct(REFERENCE_MS)
    digest = int(hashlib.sha256(key.encode()).hexdigest()[:6], 16)
    if "/fix" not in key and digest % 3 == 0:
        return failure("compile_error" if digest % 2 else "incorrect")
    if key.endswith("/fix1") and digest % 2 == 0:
        return failure("runtime_error")
    return correct(runtime(key))


def run(tmp_path, *, limit: int, config: PikeOConfig | None = None, outcome=mixed, **ctx_args) -> ScriptedContext:
    strategy = PikeO(config or PikeOConfig())
    ctx = ScriptedContext(make_task(tmp_path), limit, strategy.overshoot(), default_outcome=outcome, **ctx_args)
    strategy.run_task(ctx)
    return ctx


def small(**overrides) -> PikeOConfig:
    values = {"parallel_evaluations": 4, "num_islands": 2, "max_fix_attempts": 2, "migration_interval": 3}
    return PikeOConfig(**{**values, **overrides})


def firsts(ctx: ScriptedContext):
    """Each iteration's optimize query, in iteration order."""
    return [q for q in ctx.counted if q.meta["fix"] == 0]


# -- iterations, islands, waves -----------------------------------------------------------------------


def test_iterations_run_in_waves_round_robin_over_islands_with_keys_by_iteration(tmp_path):
    ctx = run(tmp_path, limit=40, config=small())
    queries = firsts(ctx)
    assert [q.key for q in queries] == [f"it{i:04d}" for i in range(len(queries))]
    assert all(re.fullmatch(r"it\d{4}(/fix[12])?", key) for key in ctx.issued_keys())
    assert [q.meta["island"] for q in queries] == [i % 2 for i in range(len(queries))]
    assert [q.meta["phase"] for q in queries] == [i // 4 for i in range(len(queries))]
    assert all(q.role == "optimize" for q in queries) and {q.role for q in ctx.counted} == {"optimize", "fix"}
    # A wave's parents exist before the wave starts: none comes from the same or a later wave.
    for q in queries:
        if q.parent is not None:
            assert iteration_of(q.parent) < 4 * q.meta["phase"], (q.key, q.parent)
    # Wave 0 can only build on the reference.
    assert all(q.meta["parent_is_reference"] and q.parent is None for q in queries[:4])


def test_a_child_joins_its_iterations_island(tmp_path):
    ctx = run(tmp_path, limit=120, config=small(migration_interval=1000))  # no migration
    island_of = {q.key: q.meta["island"] for q in ctx.counted}
    for q in firsts(ctx):
        for shown in [q.parent] + q.meta["top"] + q.meta["inspirations"]:
            if shown not in (None, "reference"):
                assert island_of[shown] == q.meta["island"] or q.meta["pool"] in ("all", "archive"), q.key
        if q.meta["pool"] in ("island", "archive-island") and q.parent is not None:
            assert island_of[q.parent] == q.meta["island"]


def test_fixes_count_toward_the_budget_and_the_fixed_program_enters_the_database(tmp_path):
    outcomes = {"it0001": failure("compile_error"), "it0001/fix1": failure("incorrect"),
                "it0001/fix2": correct(0.5), "it0002": failure("timeout")}

    def outcome(key):
        if key == "initial":
            return correct(REFERENCE_MS)
        return failure("runtime_error") if key.startswith("it0002") else correct(4.0)

    ctx = run(tmp_path, limit=12, config=small(num_islands=1, exploitation_ratio=1.0, exploration_ratio=0.0),
              outcomes=outcomes, outcome=outcome)
    keys = [q.key for q in ctx.counted]
    assert keys[:8] == ["it0000", "it0001", "it0002", "it0003",
                        "it0001/fix1", "it0002/fix1", "it0001/fix2", "it0002/fix2"]
    assert [q.index for q in ctx.counted] == list(range(1, len(keys) + 1))  # every fix was counted
    fix2 = ctx.by_key("it0001/fix2")
    assert prompting.prompt_kind(fix2.messages) == "fix" and fix2.quoted == program_for("it0001/fix1")
    assert fix2.parent == "it0001/fix1" and fix2.meta["iteration"] == 1
    # Wave 1 (4 queries left) exploits the archive: it0000, it0001/fix2, it0002/fix2 (failed) and it0003;
    # the originals it0001, it0002 and fix1 never entered.
    wave1 = [q for q in firsts(ctx) if q.meta["phase"] == 1]
    assert len(wave1) == 4 and len(ctx.counted) == 12
    parents = {q.parent for q in wave1}
    assert parents <= {"it0000", "it0001/fix2", "it0002/fix2", "it0003"}
    assert not parents & {"it0001", "it0002", "it0001/fix1", "it0002/fix1"}


def test_without_error_fixing_failures_enter_the_database_as_they_are(tmp_path):
    ctx = run(tmp_path, limit=30, config=PikeOConfig(preset="mut,npar,1isl,noEFA"))
    assert {q.role for q in ctx.counted} == {"optimize"} and len(ctx.counted) == 30
    failed = {q.key for q in ctx.counted if not ctx.attempts[q.key].is_correct}
    assert failed and {q.parent for q in ctx.counted} & failed  # failures can be parents


def test_a_query_that_produced_no_program_is_not_fixed_and_adds_nothing(tmp_path):
    def reply(query):
        return None if query.key == "it0001" else f"```python\n{program_for(query.key)}```"

    ctx = run(tmp_path, limit=16, config=small(), reply=reply)
    assert ctx.attempts["it0001"].llm_error and "it0001/fix1" not in ctx.issued_keys()
    mentioned = {k for q in ctx.counted for k in [q.parent, *q.meta["top"], *q.meta["inspirations"]]}
    assert "it0001" not in mentioned


# -- budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3, 4, 5, 9, 17, 31])
@pytest.mark.parametrize("parallel", [1, 4])
def test_waves_and_fix_rounds_start_below_the_budget_and_stay_within_the_overshoot(tmp_path, limit, parallel):
    strategy = PikeO(small(parallel_evaluations=parallel))
    ctx = ScriptedContext(make_task(tmp_path), limit, strategy.overshoot(), default_outcome=mixed)
    strategy.run_task(ctx)
    used = len(ctx.counted)
    assert strategy.overshoot() == parallel - 1
    assert limit <= used <= limit + parallel - 1
    rounds: dict[tuple[int, int], list] = {}
    for q in ctx.counted:
        rounds.setdefault((q.meta["phase"], q.meta["fix"]), []).append(q)
    for (_, fix), group in rounds.items():
        assert group[0].used_before < limit
        if fix == 0:  # a wave never starts more iterations than queries are left
            assert len(group) == min(parallel, limit - group[0].used_before)
    assert [q.index for q in ctx.counted] == list(range(1, used + 1))


def test_a_host_refusal_mid_wave_ends_the_task_cleanly(tmp_path):
    ctx = run(tmp_path, limit=40, config=small(), refuse_after=10)
    assert len(ctx.counted) == 10
    assert sorted(ctx.completed) == sorted(ctx.attempts)


# -- parents: explore / exploit / random, and the reference -----------------------------------------


def test_the_split_over_many_iterations_and_the_reference_is_never_an_exploitation_parent(tmp_path):
    ctx = run(tmp_path, limit=1500, config=PikeOConfig(max_fix_attempts=0, migration_interval=20))
    queries = firsts(ctx)
    modes = Counter(q.meta["mode"] for q in queries)
    total = len(queries)
    assert total == 1500
    # Binomial sd at n=1500 is at most 0.013: 0.05 is nearly 4 sigma.
    assert modes["explore"] / total == pytest.approx(0.2, abs=0.05)
    assert modes["exploit"] / total == pytest.approx(0.7, abs=0.05)
    assert modes["random"] / total == pytest.approx(0.1, abs=0.05)
    for q in queries:
        if q.meta["pool"].startswith("archive"):
            assert q.meta["mode"] == "exploit" and not q.meta["parent_is_reference"]
        if q.meta["parent_is_reference"]:
            assert q.meta["pool"] in ("island", "all")
    # Once the archive holds anything, an exploitation draw never falls back to the reference.
    fallbacks = [q for q in queries if q.meta["mode"] == "exploit" and not q.meta["pool"].startswith("archive")]
    assert all(q.meta["phase"] == 0 for q in fallbacks)


def test_exploitation_only_builds_on_the_reference_only_until_a_program_is_archived(tmp_path):
    ctx = run(tmp_path, limit=60, config=PikeOConfig(preset="mut,npar,1isl,EO,SL"))
    queries = firsts(ctx)
    assert queries[0].parent is None and queries[0].meta["pool"] == "island"
    assert all(q.parent is not None and q.meta["pool"] == "archive-island" for q in queries[1:])
    assert {q.meta["mode"] for q in queries} == {"exploit"}


# -- migration ------------------------------------------------------------------------------------


def test_migrants_reach_the_other_islands_prompts(tmp_path):
    ctx = run(tmp_path, limit=150, config=small(num_islands=3, parallel_evaluations=6, migration_interval=2,
                                                 migration_rate=0.3, max_fix_attempts=1))
    island_of = {q.key: q.meta["island"] for q in ctx.counted}
    seen_copies = 0
    for q in firsts(ctx):
        shown = [q.meta["parent_id"], *q.meta["top"], *q.meta["inspirations"]]
        for program_id in shown:
            if "@m" not in program_id:
                continue
            source, target = re.fullmatch(r"(.+)@m\d+i(\d)", program_id).groups()
            target = int(target)
            assert target != (0 if source == "reference" else island_of[source])
            if program_id != q.meta["parent_id"] or q.meta["pool"] in ("island", "archive-island"):
                assert target == q.meta["island"]
            seen_copies += 1
    assert seen_copies > 10


def test_without_migration_islands_stay_isolated(tmp_path):
    ctx = run(tmp_path, limit=80, config=small(num_islands=3, migration_interval=10_000, exploration_ratio=0.3,
                                                exploitation_ratio=0.7))
    island_of = {q.key: q.meta["island"] for q in ctx.counted}
    for q in firsts(ctx):
        assert not any("@m" in pid for pid in [q.meta["parent_id"], *q.meta["top"], *q.meta["inspirations"]])
        if q.meta["pool"] in ("island", "archive-island") and q.parent is not None:
            assert island_of[q.parent] == q.meta["island"]


# -- prompts --------------------------------------------------------------------------------------


def test_crossover_prompts_show_fitness_top_and_inspiration_programs_then_the_current_one(tmp_path):
    ctx = run(tmp_path, limit=60, config=small(num_islands=1, num_top_programs=3, num_inspirations=2))
    fitness = {k: 1.0 / a.result.runtime_ms if a.is_correct else 0.0 for k, a in ctx.attempts.items()}
    fitness["reference"] = 1.0 / REFERENCE_MS
    rich = 0
    for q in firsts(ctx):
        assert is_crossover(q.messages) and prompting.prompt_kind(q.messages) == "optimize"
        sections = crossover_sections(q.messages)
        current = key_of(sections.current)
        assert current == (q.parent or "reference")
        assert sections.fitness == format_fitness(fitness[current])
        tops = [key_of(p) for p in sections.tops]
        assert tops == [pid.split("@")[0] for pid in q.meta["top"]]
        assert sections.top_fitness == [format_fitness(fitness[k]) for k in tops]
        assert [fitness[k] for k in tops] == sorted((fitness[k] for k in tops), reverse=True)
        insp = [key_of(p) for p in sections.inspirations]
        assert insp == q.meta["inspirations"]
        assert current not in tops + insp and not set(tops) & set(insp)
        assert len(tops) <= 3 and len(insp) <= 2
        rich += len(tops) == 3 and len(insp) == 2
        assert REFERENCE_SOURCE in q.prompt and prompting.EXAMPLE_SOLUTION in q.prompt
    assert rich > 5


def test_a_failed_current_program_shows_its_evaluation_artifacts(tmp_path):
    def outcome(key):
        if key == "initial":
            return correct(REFERENCE_MS)
        return failure("runtime_error", stderr_tail="Traceback: CUDA-ILLEGAL-ADDRESS")

    ctx = run(tmp_path, limit=12, outcome=outcome,
              config=small(num_islands=1, max_fix_attempts=0, exploration_ratio=1.0, exploitation_ratio=0.0))
    failing_parent = [q for q in firsts(ctx) if q.parent is not None]
    assert failing_parent
    for q in failing_parent:
        assert crossover_sections(q.messages).fitness == "0.0000"
        assert "CUDA-ILLEGAL-ADDRESS" in q.prompt and "Timed out: no" in q.prompt


def test_mutation_prompts_carry_only_the_reference_and_the_current_program(tmp_path):
    ctx = run(tmp_path, limit=40, config=small(template="mutation"))
    for q in firsts(ctx):
        assert not is_crossover(q.messages)
        assert prompting.prompt_kind(q.messages) == "improve"
        assert key_of(q.quoted) == (q.parent or "reference")
        blocks = prompting.code_blocks(q.prompt)
        # the worked example (reference and solution), the task's reference, the current program
        assert blocks == [prompting.EXAMPLE_REFERENCE, prompting.EXAMPLE_SOLUTION, REFERENCE_SOURCE, q.quoted]
        assert "itness" not in q.prompt and q.meta["top"] == [] and q.meta["inspirations"] == []
        for attempt in ctx.attempts.values():
            if attempt.is_correct:
                assert f"{attempt.result.runtime_ms:g}" not in q.prompt


# -- determinism (resume replays the strategy from the start) -------------------------------------


def test_same_answers_give_the_same_queries_whatever_the_completion_order(tmp_path):
    traces, completed = [], []
    for completion, seed in (("reverse", 0), ("shuffle", 3), ("shuffle", 4)):
        strategy = PikeO(small(num_islands=3, parallel_evaluations=5))
        ctx = ScriptedContext(make_task(tmp_path), 80, strategy.overshoot(), default_outcome=mixed,
                              completion=completion, seed=seed)
        ctx.rng = random.Random(7)  # the same task rng; only the completion order differs
        strategy.run_task(ctx)
        traces.append([(q.key, q.parent, q.prompt, tuple(sorted(q.meta.items(), key=str))) for q in ctx.queries])
        completed.append(ctx.completed)
    assert traces[0] and traces[0] == traces[1] == traces[2]
    assert completed[0] != completed[1] != completed[2]  # the host really completed them differently


def test_the_draws_come_from_the_tasks_rng(tmp_path):
    outcome_rng = random.Random(0)
    verdicts: dict[str, object] = {}

    def outcome(key):
        if key not in verdicts:
            verdicts[key] = correct(REFERENCE_MS) if key == "initial" else correct(outcome_rng.uniform(1, 9))
        return verdicts[key]

    first = run(tmp_path, limit=40, config=small(), outcome=outcome, seed=1)
    second = run(tmp_path, limit=40, config=small(), outcome=outcome, seed=2)  # another task rng
    assert [q.parent for q in first.counted] != [q.parent for q in second.counted]
