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
from pikeh_pike_o import PikeO, PikeOConfig, prompts
from pikeh_pike_o.prompts import crossover_sections, format_fitness, is_crossover

from pike_harness.api import code_fences, failure_reports, prompt_kinds, prompt_templates
from pike_harness.contracts.model import OutputCheck
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


# -- iterations in flight, islands -------------------------------------------------------------------


def all_correct(key):
    return correct(REFERENCE_MS if key == "initial" else runtime(key))


def island_of_child(ctx: ScriptedContext) -> dict[str, int]:
    """The island each iteration's child joined (its parent's), by attempt key."""
    return {q.key: q.meta["child_island"] for q in ctx.counted}


def home_island(program_id: str, child_island: dict[str, int]) -> int:
    """Where a program lives: a seeded copy (``<best>@s<n>i<island>``) on the island it seeded, the
    reference on island 0, a child on its parent's island."""
    if "@s" in program_id:
        return int(program_id.rsplit("i", 1)[1])
    return 0 if program_id == "reference" else child_island[program_id]


def test_2w_iterations_are_in_flight_spread_over_the_islands(tmp_path):
    """W=4 and 2 islands: 8 iterations in flight, 4 per island, before any finishes; each later one
    starts when the oldest finishes and sees exactly the children of the iterations before it."""
    strategy = PikeO(small())
    ctx = ScriptedContext(make_task(tmp_path), 30, strategy.overshoot(), default_outcome=all_correct,
                          settle_at=8)  # resolve once 8 are pending: a count, not a timer
    strategy.run_task(ctx)
    queries = firsts(ctx)
    assert ctx.max_pending == 8  # 2W evaluations in flight at once, never more
    assert ctx.fallback_settles == 0  # every batch filled up to 8 (or the budget ran out) on its own
    assert [q.key for q in queries] == [f"it{i:04d}" for i in range(30)]
    assert [q.meta["island"] for q in queries[:8]] == [0] * 4 + [1] * 4  # OpenEvolve's first batch
    assert all(q.meta["parent_is_reference"] for q in queries[:8])  # nothing had finished yet
    tight = 0
    for q in queries[8:]:
        visible = {f"it{i:04d}" for i in range(q.meta["iteration"] - 7)}  # iteration i sees 0..i-8
        shown = {pid.split("@")[0] for pid in [q.meta["parent_id"], *q.meta["top"], *q.meta["diverse"],
                                               *q.meta["inspirations"]]} - {"reference"}
        assert shown <= visible, (q.key, shown - visible)
        tight += f"it{q.meta['iteration'] - 8:04d}" in shown  # the newest child it can see
    assert tight > 3


def test_npar_keeps_two_iterations_in_flight_with_one_island_and_three_with_three():
    assert PikeOConfig(preset="mut,npar,1isl").in_flight_per_island == 2
    three = PikeOConfig(preset="mut,npar")
    assert three.in_flight_per_island * three.num_islands == 3
    paper = PikeOConfig()
    assert paper.in_flight_per_island * paper.num_islands == 39


def test_a_child_joins_its_parents_island(tmp_path):
    ctx = run(tmp_path, limit=150, config=small(num_islands=3, migration_interval=1000, exploration_ratio=0.5,
                                                 exploitation_ratio=0.3))  # no migration
    child_island = island_of_child(ctx)
    elsewhere = 0
    for q in firsts(ctx):
        parent_island = home_island(q.meta["parent_id"], child_island)
        if q.meta["pool"] == "seeded":  # a fresh copy of the best, put on the empty island drawn for
            assert parent_island == q.meta["island"]
        assert q.meta["child_island"] == q.meta["parent_island"] == parent_island, q.key
        elsewhere += q.meta["child_island"] != q.meta["island"]
        if q.meta["pool"] in ("island", "archive-island"):
            assert parent_island == q.meta["island"]
    assert elsewhere > 5  # random and archive draws from other islands send children there, not here


def test_fixes_count_toward_the_budget_and_the_fixed_program_enters_the_database(tmp_path):
    outcomes = {"it0001": failure("compile_error"), "it0001/fix1": failure("incorrect"),
                "it0001/fix2": correct(0.5), "it0002": failure("timeout")}

    def outcome(key):
        if key == "initial":
            return correct(REFERENCE_MS)
        return failure("runtime_error") if key.startswith("it0002") else correct(4.0)

    ctx = run(tmp_path, limit=14, config=small(num_islands=1, parallel_evaluations=2, exploitation_ratio=1.0,
                                                exploration_ratio=0.0), outcomes=outcomes, outcome=outcome)
    keys = {q.key for q in ctx.counted}
    assert {"it0001/fix1", "it0001/fix2", "it0002/fix1", "it0002/fix2"} <= keys
    assert sorted(q.index for q in ctx.counted) == list(range(1, 15))  # every fix was counted
    fix2 = ctx.by_key("it0001/fix2")
    assert prompt_kinds.prompt_kind(fix2.messages) == "fix" and fix2.quoted == program_for("it0001/fix1")
    assert fix2.parent == "it0001/fix1" and fix2.meta["iteration"] == 1
    # PIKE-O's own error-fixing prompt: generic words and raw artifacts, not PIKE-B's failure report.
    assert "failed to compile, failed the correctness check, or timed out" in fix2.prompt
    assert '"category": "incorrect"' in fix2.prompt and "Evaluation result:" not in fix2.prompt
    assert fix2.messages[0]["content"] == prompts.default_pack().text("system.txt")
    # Later iterations exploit the archive: the fixed programs entered, the originals never did.
    later = firsts(ctx)[4:]
    parents = {q.parent for q in later}
    assert parents and not parents & {"it0001", "it0002", "it0001/fix1", "it0002/fix1"}
    assert "it0001/fix2" in {k for q in later for k in [q.parent, *q.meta["top"]]}


def test_a_result_with_a_3_mb_reason_gives_a_fix_prompt_within_the_caps(tmp_path):
    # PIKE's fork shows the artifacts whole (efa_tail_chars 0, the default); a hostile candidate's forged
    # result of megabytes would exceed the model's context window and stop the task for good.
    # Set past the cut every result makes of its strings (worker/records.py), as a result made by other
    # code could carry them: the prompt's own caps must hold whatever a result says.
    huge = 3_000_000
    forged = failure("rejected")
    forged.reason, forged.check = "REASON-HEAD " + "r" * huge, "c" * huge
    forged.stdout_tail, forged.stderr_tail = "o" * huge, "e" * huge + "STDERR-END"
    forged.outputs = [OutputCheck(input_set=0, index=0, problem="p" * huge)]
    ctx = run(tmp_path, limit=6, config=small(num_islands=1, parallel_evaluations=1, max_fix_attempts=1),
              outcomes={"it0001": forged}, outcome=all_correct)
    prompt = ctx.by_key("it0001/fix1").prompt
    caps = failure_reports
    bound = (caps.PROMPT_REASON_CHARS + caps.PROMPT_CHECK_CHARS + caps.PROMPT_PROBLEM_CHARS
             + 2 * caps.PROMPT_LOG_CHARS + 5_000)
    assert len(prompt) < bound
    assert "REASON-HEAD" in prompt and "[cut: the first 24,000 of 3,000,012 characters]" in prompt
    assert "STDERR-END" in prompt and "[cut: the last 40,000 of 3,000,010 characters]" in prompt
    # The crossover prompt's artifacts too, whatever --log-tail-chars says.
    shown = prompts.raw_artifacts(forged, 10**9, head=True)
    assert len(shown) < bound and "STDERR-END" in shown


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


@pytest.mark.parametrize("keep", [False, True])
def test_a_fix_query_that_failed_for_good_drops_the_iteration_as_pikes_fork_does(tmp_path, keep):
    def reply(query):
        return None if query.key == "it0001/fix1" else f"```python\n{program_for(query.key)}```"

    def outcome(key):
        if key == "initial":
            return correct(REFERENCE_MS)
        return failure("compile_error") if key == "it0001" else correct(runtime(key))

    ctx = run(tmp_path, limit=30, config=small(num_islands=1, keep_after_llm_failure=keep), reply=reply,
              outcome=outcome)
    assert ctx.attempts["it0001/fix1"].llm_error and "it0001/fix2" not in ctx.issued_keys()
    mentioned = {k for q in firsts(ctx) for k in [q.parent, *q.meta["top"], *q.meta["inspirations"]]}
    assert ("it0001" in mentioned) == keep  # PIKE: no program; ours: the failed original joins


# -- budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3, 4, 5, 9, 17, 31])
@pytest.mark.parametrize("parallel", [1, 4])
def test_iterations_and_fixes_start_only_below_the_budget_so_it_is_never_exceeded(tmp_path, limit, parallel):
    strategy = PikeO(small(parallel_evaluations=parallel))
    ctx = ScriptedContext(make_task(tmp_path), limit, strategy.overshoot(), default_outcome=mixed)
    strategy.run_task(ctx)
    assert strategy.overshoot() == 0
    assert len(ctx.counted) == limit
    assert all(q.used_before < limit for q in ctx.counted)
    assert sorted(q.index for q in ctx.counted) == list(range(1, limit + 1))
    assert sorted(ctx.completed) == sorted(ctx.attempts)  # every submitted attempt was collected


def test_a_host_refusal_ends_the_task_cleanly(tmp_path):
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
            assert q.meta["pool"] in ("island", "seeded", "all")
    # Once the archive holds anything, an exploitation draw never falls back to the reference.
    fallbacks = [q for q in queries if q.meta["mode"] == "exploit" and not q.meta["pool"].startswith("archive")]
    assert all(q.meta["iteration"] < 39 for q in fallbacks)  # only the first batch, before any child


def test_exploitation_only_builds_on_the_reference_only_until_a_program_is_archived(tmp_path):
    ctx = run(tmp_path, limit=60, config=PikeOConfig(preset="mut,npar,1isl,EO,SL"))
    queries = firsts(ctx)
    assert all(q.parent is None and q.meta["pool"] == "island" for q in queries[:2])  # 2 in flight at first
    assert all(q.parent is not None and q.meta["pool"] == "archive-island" for q in queries[2:])
    assert {q.meta["mode"] for q in queries} == {"exploit"}


# -- migration ------------------------------------------------------------------------------------


def test_migrants_reach_the_next_islands_prompts(tmp_path):
    ctx = run(tmp_path, limit=150, config=small(num_islands=3, parallel_evaluations=6, migration_interval=2,
                                                 migration_rate=0.3, max_fix_attempts=1))
    child_island = island_of_child(ctx)
    seen_copies = 0
    for q in firsts(ctx):
        for program_id in [q.meta["parent_id"], *q.meta["top"], *q.meta["diverse"], *q.meta["inspirations"]]:
            if "@m" not in program_id:
                continue
            source, target = re.fullmatch(r"(.+)@m(\d)", program_id).groups()
            source_island = home_island(source, child_island)
            assert int(target) in ((source_island + 1) % 3, (source_island - 1) % 3)  # both neighbours
            if program_id != q.meta["parent_id"] or q.meta["pool"] in ("island", "archive-island"):
                assert int(target) == q.meta["island"]
            seen_copies += 1
    assert seen_copies > 10


def test_without_migration_islands_stay_isolated(tmp_path):
    ctx = run(tmp_path, limit=80, config=small(num_islands=3, migration_interval=10_000, exploration_ratio=0.3,
                                                exploitation_ratio=0.7))
    child_island = island_of_child(ctx)
    for q in firsts(ctx):
        assert not any("@m" in pid for pid in [q.meta["parent_id"], *q.meta["top"], *q.meta["inspirations"]])
        if q.meta["pool"] in ("island", "archive-island"):
            assert home_island(q.meta["parent_id"], child_island) == q.meta["island"]


# -- prompts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["pike", "ours"])
def test_crossover_prompts_carry_pikes_sections_then_the_current_program(tmp_path, content):
    ctx = run(tmp_path, limit=60, config=small(num_islands=1, crossover_content=content))
    fitness = {k: 1.0 / a.result.runtime_ms if a.is_correct else 0.0 for k, a in ctx.attempts.items()}
    fitness["reference"] = 1.0 / REFERENCE_MS
    rich = tops_with_current = 0
    for q in firsts(ctx):
        assert is_crossover(q.messages) and prompt_kinds.prompt_kind(q.messages) == "optimize"
        assert q.messages[0]["content"] == prompts.default_pack().text("system.txt")  # a performance engineering expert
        sections = crossover_sections(q.messages)
        current = key_of(sections.current)
        assert current == (q.parent or "reference")
        assert sections.fitness == format_fitness(fitness[current])
        assert "category: " in sections.info  # raw evaluation results, also for a correct program
        tops = [key_of(p) for p in sections.tops]
        assert tops == [pid.split("@")[0] for pid in q.meta["top"]]
        assert sections.top_fitness == [format_fitness(fitness[k]) for k in tops]
        assert [fitness[k] for k in tops] == sorted((fitness[k] for k in tops), reverse=True)
        tops_with_current += current in tops  # the island's top 3 may include the current program
        diverse = [key_of(p) for p in sections.diverse]
        assert diverse == [pid.split("@")[0] for pid in q.meta["diverse"]] and not set(diverse) & set(tops)
        insp = [key_of(p) for p in sections.inspirations]
        assert insp == q.meta["inspirations"] and current not in insp
        assert len(tops) <= 3 and len(diverse) <= 2 and len(insp) <= 3 and len(sections.previous) <= 3
        for line in sections.previous:  # previous attempts show raw runtimes, never code
            assert "runtime_ms=" in line or "correct" not in line
        if content == "pike":
            # The fork: previous attempts are the top programs again, last one first; the diverse ones
            # the next fittest; inspirations may repeat a top or diverse program; no coordinates.
            assert [line.split(":", 1)[0] for line in sections.previous] == [
                f"- Attempt {n}" for n in range(len(tops), 0, -1)]
            ranked_fitness = sorted(fitness[k] for k in tops + diverse)
            assert all(fitness[d] <= min(fitness[t] for t in tops) for d in diverse), ranked_fitness
            assert "complexity" not in sections.info.split("Feature coordinates:")[1].split("\n", 2)[-1]
            assert "### Top program 1 (fitness " in q.prompt and "bins 0 to" not in q.prompt.split("## Top")[1]
        else:
            assert not set(tops + diverse) & set(insp)
        rich += len(tops) == 3 and len(diverse) == 2 and len(insp) == 3 and len(sections.previous) == 3
        assert REFERENCE_SOURCE in q.prompt and prompt_templates.example_pair()[1] in q.prompt
    assert rich > 5 and tops_with_current > 0


def test_a_failed_current_program_shows_its_raw_evaluation_artifacts(tmp_path):
    def outcome(key):
        if key == "initial":
            return correct(REFERENCE_MS)
        return failure("runtime_error", stderr_tail="Traceback: CUDA-ILLEGAL-ADDRESS")

    ctx = run(tmp_path, limit=12, outcome=outcome,
              config=small(num_islands=1, max_fix_attempts=0, exploration_ratio=1.0, exploitation_ratio=0.0))
    failing_parent = [q for q in firsts(ctx) if q.parent is not None]
    assert failing_parent
    for q in failing_parent:
        sections = crossover_sections(q.messages)
        assert sections.fitness == "0.0000"
        assert "CUDA-ILLEGAL-ADDRESS" in sections.info and "category: runtime_error" in sections.info
        assert "timed_out: False" in sections.info


def test_mutation_prompts_carry_only_the_reference_and_the_current_program(tmp_path):
    ctx = run(tmp_path, limit=40, config=small(template="mutation"))
    for q in firsts(ctx):
        assert not is_crossover(q.messages)
        assert prompt_kinds.prompt_kind(q.messages) == "improve"
        assert key_of(q.quoted) == (q.parent or "reference")
        blocks = code_fences.code_blocks(q.prompt)
        # the worked example (reference and solution), the task's reference, the current program
        assert blocks == [*(p + "\n" for p in prompt_templates.example_pair()), REFERENCE_SOURCE, q.quoted]
        assert "itness" not in q.prompt and q.meta["top"] == [] and q.meta["inspirations"] == []
        for attempt in ctx.attempts.values():
            if attempt.is_correct:
                assert f"{attempt.result.runtime_ms:g}" not in q.prompt


# -- determinism (resume replays the strategy from the start) -------------------------------------


def test_same_answers_give_the_same_queries_whatever_the_completion_order(tmp_path):
    """Children are added in iteration order, so every prompt is a function of the answers: completion
    order changes at most which queries fit under the budget at its very end (fix chains charge as
    their verdicts arrive)."""
    traces, completed = [], []
    for completion, seed in (("reverse", 0), ("shuffle", 3), ("shuffle", 4)):
        strategy = PikeO(small(num_islands=3, parallel_evaluations=5))
        ctx = ScriptedContext(make_task(tmp_path), 80, strategy.overshoot(), default_outcome=mixed,
                              completion=completion, seed=seed)
        ctx.rng = random.Random(7)  # the same task rng; only the completion order differs
        strategy.run_task(ctx)
        traces.append({q.key: (q.parent, q.prompt, tuple(sorted(q.meta.items(), key=str))) for q in ctx.queries})
        completed.append(ctx.completed)
    common = set(traces[0]) & set(traces[1]) & set(traces[2])
    assert len(common) >= 60
    for key in common:
        assert traces[0][key] == traces[1][key] == traces[2][key], key
    optimize = [sorted(k for k in trace if "/fix" not in k) for trace in traces]
    shortest = min(len(o) for o in optimize)
    assert optimize[0][:shortest - 6] == optimize[1][:shortest - 6] == optimize[2][:shortest - 6]
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
