"""PIKE-B's search structure against a scripted host: phases, splits, fixes, budget, variants, replay."""

from __future__ import annotations

import random
import re
import typing

import pytest
from pikeh_pike_b import PikeB, PikeBConfig
from pikeh_pike_b.selection import Parent, Solution, rank_parents, split_evenly

from pike_harness.api import UserError, failure_reports, idea_lists, prompt_kinds, prompt_templates
from pike_harness.testing.context import (
    REFERENCE_SOURCE,
    ScriptedContext,
    correct,
    failure,
    incorrect,
    make_task,
    program_for,
)


def run(tmp_path, *, limit: int, config: PikeBConfig | None = None, **ctx_args) -> ScriptedContext:
    strategy = PikeB(config or PikeBConfig())
    ctx = ScriptedContext(make_task(tmp_path), limit, strategy.overshoot(), **ctx_args)
    strategy.run_task(ctx)
    return ctx


def all_correct(key: str):
    return correct(1.0)


def phase_queries(ctx: ScriptedContext, phase: int, *, fixes: bool = False):
    return [q for q in ctx.counted if q.meta["phase"] == phase and (fixes or q.meta["fix"] == 0)]


def quoted_parents(ctx: ScriptedContext, phase: int) -> list[str | None]:
    """For each optimize query of the phase, the key of the program its prompt quotes (or 'reference')."""
    names = []
    for q in phase_queries(ctx, phase):
        quoted = q.quoted
        if quoted == REFERENCE_SOURCE:
            names.append("reference")
        else:
            match = re.search(r"source_key = '([^']+)'", quoted or "")
            names.append(match.group(1) if match else None)
    return names


# -- structure ------------------------------------------------------------------------------------

def test_one_uncounted_brainstorm_then_ten_optimize_queries_per_phase(tmp_path):
    ctx = run(tmp_path, limit=30, default_outcome=all_correct)
    first = ctx.queries[0]
    assert (first.key, first.role, first.counted) == ("brainstorm", "brainstorm", False)
    assert prompt_kinds.prompt_kind(first.messages) == "brainstorm"
    assert [q.role for q in ctx.queries].count("brainstorm") == 1
    assert [q.key for q in ctx.counted] == [f"p{p:03d}/s{s:02d}" for p in range(3) for s in range(10)]
    for s, q in enumerate(phase_queries(ctx, 0)):
        assert q.role == "optimize"
        assert prompt_kinds.prompt_kind(q.messages) == "optimize"
        assert q.prompt.endswith(f"Focus on this optimization task: idea number {s}")
        assert q.parent is None
    for q in phase_queries(ctx, 1) + phase_queries(ctx, 2):
        assert prompt_kinds.prompt_kind(q.messages) == "improve"
        assert "Focus on" not in q.prompt
    assert all(re.fullmatch(r"brainstorm|p\d{3}/s\d{2}(/fix[1-5])?", k) for k in ctx.issued_keys())


def test_ideas_are_repeated_or_cut_to_the_number_of_branches(tmp_path):
    def three_ideas(query):
        if query.role == "brainstorm":
            return "Some thoughts first.\n\n- fuse a\n* tile b\n1. vectorise c\n\nGood luck!"
        return f"```\n{program_for(query.key)}```"

    ctx = run(tmp_path, limit=10, reply=three_ideas, default_outcome=all_correct)
    foci = [q.prompt.rsplit("optimization task: ", 1)[1] for q in phase_queries(ctx, 0)]
    assert foci == ["fuse a", "tile b", "vectorise c"] * 3 + ["fuse a"]

    def twelve_ideas(query):
        if query.role == "brainstorm":
            return "\n".join(f"- idea {i}" for i in range(12))
        return f"```\n{program_for(query.key)}```"

    ctx = run(tmp_path, limit=10, reply=twelve_ideas, default_outcome=all_correct)
    assert [q.prompt.rsplit("optimization task: ", 1)[1] for q in phase_queries(ctx, 0)] == [f"idea {i}" for i in range(10)]


def test_a_brainstorm_without_ideas_fails_the_task_before_any_counted_query(tmp_path):
    def no_ideas(query):
        return "I would rather not speculate." if query.role == "brainstorm" else None

    with pytest.raises(idea_lists.NoIdeasError):
        run(tmp_path, limit=30, reply=no_ideas)


# -- parents and branches -------------------------------------------------------------------------

def test_four_fastest_children_become_parents_split_3_3_2_2(tmp_path):
    runtimes = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 10.0]
    outcomes = {f"p000/s{s:02d}": correct(rt) for s, rt in enumerate(runtimes)}
    ctx = run(tmp_path, limit=20, outcomes=outcomes, default_outcome=all_correct)
    expected = ["p000/s08"] * 3 + ["p000/s07"] * 3 + ["p000/s06"] * 2 + ["p000/s05"] * 2
    assert quoted_parents(ctx, 1) == expected
    assert [q.parent for q in phase_queries(ctx, 1)] == expected
    assert [q.meta["branch"] for q in phase_queries(ctx, 1)] == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]


def test_two_correct_children_and_the_reference_split_4_3_3(tmp_path):
    outcomes = {"p000/s04": correct(2.0), "p000/s01": correct(3.0)}
    ctx = run(tmp_path, limit=20, outcomes=outcomes, config=PikeBConfig(max_fix_attempts=0))
    assert quoted_parents(ctx, 1) == ["p000/s04"] * 4 + ["p000/s01"] * 3 + ["reference"] * 3
    assert [q.parent for q in phase_queries(ctx, 1)] == ["p000/s04"] * 4 + ["p000/s01"] * 3 + [None] * 3
    assert [q.meta["parent_is_reference"] for q in phase_queries(ctx, 1)] == [False] * 7 + [True] * 3


def test_the_reference_is_the_only_parent_when_nothing_is_correct(tmp_path):
    ctx = run(tmp_path, limit=20, config=PikeBConfig(max_fix_attempts=0))
    assert quoted_parents(ctx, 1) == ["reference"] * 10
    assert all(q.parent is None for q in phase_queries(ctx, 1))


def test_no_elitism_parents_come_from_the_last_phase_only(tmp_path):
    def outcome(key):
        return correct(1.0) if key.startswith("p000/") else failure("runtime_error")

    ctx = run(tmp_path, limit=30, default_outcome=outcome, config=PikeBConfig(max_fix_attempts=0))
    assert quoted_parents(ctx, 1)[0] == "p000/s00"
    assert quoted_parents(ctx, 2) == ["reference"] * 10


BRANCH_0_WINS = {"p000/s00": correct(10.0), "p000/s01": correct(20.0), "p000/s02": correct(30.0),
                 "p000/s03": correct(40.0),
                 # phase 1: branch 0 (slots 0-2) has the three fastest children
                 "p001/s00": correct(1.0), "p001/s01": correct(2.0), "p001/s02": correct(3.0),
                 "p001/s03": correct(50.0),  # branch 1
                 "p001/s06": correct(60.0)}  # branch 2


def test_parents_are_the_four_fastest_even_from_one_branch(tmp_path):
    """PIKE's rule: its candidate list is re-sorted by runtime, so parents may share a branch."""
    ctx = run(tmp_path, limit=30, outcomes=BRANCH_0_WINS, config=PikeBConfig(max_fix_attempts=0))
    assert quoted_parents(ctx, 1) == ["p000/s00"] * 3 + ["p000/s01"] * 3 + ["p000/s02"] * 2 + ["p000/s03"] * 2
    assert quoted_parents(ctx, 2) == ["p001/s00"] * 3 + ["p001/s01"] * 3 + ["p001/s02"] * 2 + ["p001/s03"] * 2


def test_parents_spread_puts_the_best_child_of_each_branch_before_faster_siblings(tmp_path):
    ctx = run(tmp_path, limit=30, outcomes=BRANCH_0_WINS,
              config=PikeBConfig(max_fix_attempts=0, parents="spread"))
    assert quoted_parents(ctx, 2) == ["p001/s00"] * 3 + ["p001/s03"] * 3 + ["p001/s06"] * 2 + ["p001/s01"] * 2


def test_parent_rule_is_checked():
    with pytest.raises(UserError, match="--parents must be one of fastest, spread"):
        PikeBConfig(parents="best")


def test_equal_runtimes_are_ranked_by_slot_whatever_the_completion_order(tmp_path):
    for completion, seed in (("reverse", 0), ("shuffle", 1), ("shuffle", 2)):
        ctx = run(tmp_path, limit=20, default_outcome=all_correct, completion=completion, seed=seed)
        assert quoted_parents(ctx, 1) == ["p000/s00"] * 3 + ["p000/s01"] * 3 + ["p000/s02"] * 2 + ["p000/s03"] * 2


def test_split_evenly_gives_larger_shares_first():
    assert split_evenly(10, 4) == [3, 3, 2, 2]
    assert split_evenly(10, 3) == [4, 3, 3]
    assert split_evenly(10, 2) == [5, 5]
    assert split_evenly(10, 1) == [10]
    assert split_evenly(7, 4) == [2, 2, 2, 1]
    assert split_evenly(3, 3) == [1, 1, 1]
    with pytest.raises(ValueError):
        split_evenly(10, 0)


def test_rank_parents_appends_the_reference_once_and_caps_the_list():
    reference = Parent(None, "ref")
    assert rank_parents([], reference, 4) == [reference]
    sols = [Solution(f"k{i}", f"c{i}", rt, branch, (i, 0)) for i, (rt, branch) in
            enumerate([(5.0, 0), (1.0, 0), (3.0, 1), (2.0, 2), (4.0, 3), (0.5, 3)])]
    assert [p.key for p in rank_parents(sols, reference, 4)] == ["k5", "k1", "k3", "k2"]
    assert [p.key for p in rank_parents(sols, reference, 4, "spread")] == ["k5", "k1", "k3", "k2"]
    assert [p.key for p in rank_parents(sols, reference, 5)] == ["k5", "k1", "k3", "k2", "k4"]
    assert [p.key for p in rank_parents(sols, reference, 5, "spread")] == ["k5", "k1", "k3", "k2", "k4"]
    assert [p.key for p in rank_parents(sols, reference, 6, "spread")] == ["k5", "k1", "k3", "k2", "k4", "k0"]
    assert [p.key for p in rank_parents(sols[:2], reference, 4)] == ["k1", "k0", None]
    assert [p.key for p in rank_parents(sols[:2], reference, 4, "spread")] == ["k1", "k0", None]
    one_branch = [Solution("a", "a", 1.0, 0, (0, 0)), Solution("b", "b", 2.0, 0, (1, 0)),
                  Solution("c", "c", 3.0, 1, (2, 0))]
    assert [p.key for p in rank_parents(one_branch, reference, 2)] == ["a", "b"]
    assert [p.key for p in rank_parents(one_branch, reference, 2, "spread")] == ["a", "c"]


# -- error fixing ---------------------------------------------------------------------------------

def test_fix_rounds_only_for_failures_at_most_five_and_fixed_children_can_be_parents(tmp_path):
    outcomes = {f"p000/s{s:02d}": correct(10.0 + s) for s in range(2, 10)}
    outcomes.update({"p000/s00": failure("compile_error"), "p000/s01": failure("runtime_error"),
                     "p000/s01/fix1": incorrect(0.5), "p000/s01/fix2": correct(0.5)})
    ctx = run(tmp_path, limit=100, outcomes=outcomes, default_outcome=lambda key: failure("compile_error")
              if key.startswith("p000/s00") else correct(20.0), config=PikeBConfig(max_phases=2))
    fixes = [q.key for q in phase_queries(ctx, 0, fixes=True) if q.role == "fix"]
    assert fixes == ["p000/s00/fix1", "p000/s01/fix1", "p000/s00/fix2", "p000/s01/fix2",
                     "p000/s00/fix3", "p000/s00/fix4", "p000/s00/fix5"]
    fix2 = ctx.by_key("p000/s01/fix2")
    assert prompt_kinds.prompt_kind(fix2.messages) == "fix"
    assert fix2.quoted == program_for("p000/s01/fix1")  # the latest failing code, not the original
    assert fix2.parent == "p000/s01/fix1"
    assert fix2.meta["fix"] == 2
    assert quoted_parents(ctx, 1)[:3] == ["p000/s01/fix2"] * 3
    assert not [q for q in phase_queries(ctx, 1, fixes=True) if q.role == "fix"]  # phase 1 all correct


def test_fix_prompts_carry_the_failure_but_never_a_runtime(tmp_path):
    stderr = "HEAD-OF-LOG " + "e" * 12_000 + " TAIL-OF-LOG"
    outcomes = {
        "p000/s00": failure("runtime_error", stderr_tail=stderr, stdout_tail="printed-line"),
        "p000/s01": failure("timeout", reason="exceeded 600 s"),
        "p000/s02": incorrect(0.25, 3.5),
    }
    runtimes = [3.14159265, 27.18281828, 1.41421356]
    default = {f"p000/s{s:02d}": correct(runtimes[s % 3] + s) for s in range(3, 10)}
    ctx = run(tmp_path, limit=13, outcomes={**default, **outcomes}, default_outcome=lambda k: correct(2.71828))
    runtime_error = ctx.by_key("p000/s00/fix1").prompt
    assert "TAIL-OF-LOG" in runtime_error and "HEAD-OF-LOG" not in runtime_error
    assert "printed-line" in runtime_error and "Timed out: False" in runtime_error
    assert "Timed out: True" in ctx.by_key("p000/s01/fix1").prompt
    wrong = ctx.by_key("p000/s02/fix1").prompt
    assert "The largest difference of each output: [0.25, 3.5]" in wrong and prompt_templates.example_pair()[1] in wrong
    for q in ctx.queries:
        for rt in runtimes + [2.71828] + [r + s for s in range(10) for r in runtimes]:
            for text in (str(rt), f"{rt:.2f}", f"{rt:.3g}"):
                assert text not in q.prompt, (q.key, text)
        assert "speedup" not in q.prompt.lower()


def test_efa_context_rich_is_ours_and_shows_per_output_differences(tmp_path):
    ctx = run(tmp_path, limit=11, outcomes={"p000/s00": incorrect(0.25, 3.5)}, default_outcome=all_correct,
              config=PikeBConfig(efa_context="rich"))
    wrong = ctx.by_key("p000/s00/fix1").prompt
    assert "output 0: max abs diff 0.25" in wrong and "output 1: max abs diff 3.5" in wrong
    with pytest.raises(UserError, match="--efa-context must be one of pike, rich"):
        PikeBConfig(efa_context="full")


def test_log_tail_length_is_a_parameter(tmp_path):
    outcomes = {"p000/s00": failure("runtime_error", stderr_tail="a" * 500 + "LAST-WORDS")}
    ctx = run(tmp_path, limit=11, outcomes=outcomes, default_outcome=all_correct,
              config=PikeBConfig(log_tail_chars=100))
    prompt = ctx.by_key("p000/s00/fix1").prompt
    assert "a" * 90 + "LAST-WORDS" in prompt and "a" * 91 + "LAST-WORDS" not in prompt


@pytest.mark.parametrize("efa_context", ["pike", "rich"])
def test_a_result_with_a_3_mb_reason_gives_a_fix_prompt_within_the_caps(tmp_path, efa_context):
    # A hostile candidate's forged result: a fix prompt of megabytes would exceed the model's context
    # window, and the provider's HTTP 400 would stop the task for good (its resume sends it again).
    # Set past the cut every result makes of its strings (worker/records.py), as a result made by other
    # code could carry them: the prompt's own caps must hold whatever a result says.
    huge = 3_000_000
    forged = failure("rejected")
    forged.reason, forged.check = "REASON-HEAD " + "r" * huge, "c" * huge
    forged.stdout_tail, forged.stderr_tail = "o" * huge, "e" * huge + "STDERR-END"
    ctx = run(tmp_path, limit=11, outcomes={"p000/s00": forged}, default_outcome=all_correct,
              config=PikeBConfig(efa_context=efa_context, log_tail_chars=10**9))
    prompt = ctx.by_key("p000/s00/fix1").prompt
    caps = failure_reports
    assert len(prompt) < caps.PROMPT_REASON_CHARS + caps.PROMPT_CHECK_CHARS + 2 * caps.PROMPT_LOG_CHARS + 5_000
    assert "REASON-HEAD" in prompt and "[cut: the first 24,000 of 3,000,012 characters]" in prompt
    assert "STDERR-END" in prompt


def test_a_query_that_produced_no_program_is_not_fixed(tmp_path):
    def reply(query):
        if query.key == "p000/s03":
            return None  # the LLM failed for good: the attempt has no code
        return f"```python\n{program_for(query.key)}```" if query.role != "brainstorm" else "- one idea"

    ctx = run(tmp_path, limit=11, reply=reply, outcomes={"p000/s05": failure("timeout")},
              default_outcome=all_correct)
    assert "p000/s05/fix1" in ctx.issued_keys()  # a fix round did run
    assert ctx.attempts["p000/s03"].llm_error
    assert "p000/s03/fix1" not in ctx.issued_keys()


# -- variants -------------------------------------------------------------------------------------

def test_no_efa_variant_issues_no_fix_queries(tmp_path):
    ctx = run(tmp_path, limit=30, config=PikeBConfig(max_fix_attempts=0))
    assert {q.role for q in ctx.counted} == {"optimize"}
    assert len(ctx.counted) == 30


def test_no_iba_variant_skips_brainstorming_and_the_idea_line(tmp_path):
    ctx = run(tmp_path, limit=20, config=PikeBConfig(brainstorm=False), default_outcome=all_correct)
    assert "brainstorm" not in {q.role for q in ctx.queries}
    assert all("Focus on" not in q.prompt for q in ctx.queries)
    phase0 = {q.prompt for q in phase_queries(ctx, 0)}
    assert len(phase0) == 1 and prompt_kinds.prompt_kind(next(iter(phase0))) == "optimize"


def test_roles_are_brainstorm_optimize_and_fix():
    assert set(PikeB.roles) == {"brainstorm", "optimize", "fix"}


# -- budget ---------------------------------------------------------------------------------------

def rounds(ctx: ScriptedContext) -> list[list]:
    """Counted queries grouped into rounds: a phase's optimize queries, or one fix round of it."""
    grouped: dict[tuple[int, int], list] = {}
    for q in ctx.counted:
        grouped.setdefault((q.meta["phase"], q.meta["fix"]), []).append(q)
    return list(grouped.values())


@pytest.mark.parametrize("limit", [1, 9, 10, 11, 25, 37, 64])
@pytest.mark.parametrize("seed", [0, 1])
def test_rounds_start_only_below_the_budget_and_finish_within_the_overshoot(tmp_path, limit, seed):
    pattern = random.Random(seed)
    verdicts: dict[str, object] = {}

    def outcome(key):
        if key not in verdicts:
            verdicts[key] = correct(pattern.uniform(1, 9)) if pattern.random() < 0.3 else failure("compile_error")
        return verdicts[key]

    strategy = PikeB(PikeBConfig())
    ctx = ScriptedContext(make_task(tmp_path), limit, strategy.overshoot(), default_outcome=outcome)
    strategy.run_task(ctx)
    used = len(ctx.counted)
    assert limit <= used <= limit + strategy.overshoot()
    for group in rounds(ctx):
        assert group[0].used_before < limit
        if group[0].meta["fix"] == 0:
            assert len(group) == 10  # a started phase sends all its optimize queries
    # No fix query is ever sent past the budget: only optimize queries overshoot.
    assert all(q.index <= limit for q in ctx.counted if q.role == "fix")
    assert [q.index for q in ctx.counted] == list(range(1, used + 1))


def test_fix_queries_stop_at_exactly_the_budget(tmp_path):
    """Every program fails and the budget is 15: 10 optimize queries, then fixes only up to 15."""
    ctx = run(tmp_path, limit=15)
    assert len([q for q in ctx.queries if q.role == "brainstorm"]) == 1
    assert [q.key for q in ctx.counted if q.role == "optimize"] == [f"p000/s{s:02d}" for s in range(10)]
    assert [q.key for q in ctx.counted if q.role == "fix"] == [f"p000/s{s:02d}/fix1" for s in range(5)]
    assert sorted(ctx.completed) == sorted(ctx.attempts)  # every submitted attempt was collected


def test_all_correct_runs_ceil_budget_over_branches_phases(tmp_path):
    assert len(run(tmp_path, limit=30, default_outcome=all_correct).counted) == 30
    assert len(run(tmp_path, limit=35, default_outcome=all_correct).counted) == 40  # overshoot 5 <= 9


def test_max_phases_caps_the_search(tmp_path):
    ctx = run(tmp_path, limit=300, default_outcome=all_correct, config=PikeBConfig(max_phases=2))
    assert len(ctx.counted) == 20


def test_a_host_refusal_mid_round_ends_the_task_cleanly(tmp_path):
    ctx = run(tmp_path, limit=30, default_outcome=all_correct, refuse_after=15)
    assert len(ctx.counted) == 15
    assert ctx.counted[-1].key == "p001/s04"
    assert sorted(ctx.completed) == sorted(ctx.attempts)  # every submitted attempt was collected


def test_overshoot_is_num_branches_minus_one():
    assert PikeB().overshoot() == 9
    assert PikeB(PikeBConfig(num_branches=6)).overshoot() == 5


# -- determinism (resume replays the strategy from the start) -------------------------------------

def test_same_answers_give_the_same_queries_whatever_the_completion_order(tmp_path):
    def outcome(key):
        n = sum(map(ord, key))
        return correct(1 + n % 7) if n % 3 else failure("runtime_error")

    runs = [run(tmp_path, limit=60, default_outcome=outcome, completion=c, seed=s)
            for c, s in (("reverse", 0), ("shuffle", 5), ("shuffle", 9))]
    trace = [[(q.key, q.role, q.parent, q.prompt) for q in ctx.queries] for ctx in runs]
    assert trace[0] == trace[1] == trace[2]
    submitted = [q.key for q in runs[1].queries if q.kind == "attempt"]
    assert runs[1].completed != submitted  # the scripted host really did complete out of order
    assert len(set(runs[0].issued_keys())) == len(runs[0].issued_keys())


# -- config ---------------------------------------------------------------------------------------

def test_config_defaults_are_the_papers_and_every_field_has_help():
    cfg = PikeBConfig()
    assert (cfg.num_branches, cfg.max_parents, cfg.max_fix_attempts, cfg.brainstorm, cfg.max_ideas,
            cfg.max_phases, cfg.log_tail_chars) == (10, 4, 5, True, 10, 0, 10_000)
    hints = typing.get_type_hints(PikeBConfig)
    for f in PikeB.config_fields():
        assert f.metadata.get("help"), f.name
        assert hints[f.name] in (bool, int, float, str, str | None), f.name


@pytest.mark.parametrize("bad", [{"num_branches": 0}, {"max_parents": 0}, {"max_fix_attempts": -1},
                                 {"max_ideas": 0}, {"max_phases": -1}, {"log_tail_chars": -5}])
def test_config_rejects_impossible_values_naming_the_option(bad):
    with pytest.raises(UserError, match="--" + next(iter(bad)).replace("_", "-")):
        PikeBConfig(**bad)


@pytest.mark.parametrize("seed", range(8))
def test_the_demos_configuration_stays_within_the_budget_rule(tmp_path, seed):
    """`pikeh demo` (4 branches, 2 fix rounds, budget 12): fixes stop at 12, and only a phase started
    below 12 may send its optimize queries past it (at most 15 in all)."""
    from pikeh_offline import DEFAULT_DEMO

    DEMO_QUERY_BUDGET, DEMO_STRATEGY_OPTIONS = DEFAULT_DEMO.query_budget, dict(DEFAULT_DEMO.strategy_options)

    pattern = random.Random(seed)
    verdicts: dict[str, object] = {}

    def outcome(key):
        if key not in verdicts:
            verdicts[key] = correct(pattern.uniform(1, 9)) if pattern.random() < 0.5 else failure("runtime_error")
        return verdicts[key]

    strategy = PikeB(PikeBConfig(**DEMO_STRATEGY_OPTIONS))
    ctx = ScriptedContext(make_task(tmp_path), DEMO_QUERY_BUDGET, strategy.overshoot(), default_outcome=outcome)
    strategy.run_task(ctx)
    assert len(ctx.counted) <= DEMO_QUERY_BUDGET + DEMO_STRATEGY_OPTIONS["num_branches"] - 1
    assert all(q.index <= DEMO_QUERY_BUDGET for q in ctx.counted if q.role == "fix")
    past = [q for q in ctx.counted if q.index > DEMO_QUERY_BUDGET]
    assert all(q.role == "optimize" for q in past)
    if past:  # they belong to one phase, which started below the budget
        phase = {q.meta["phase"] for q in past}
        assert len(phase) == 1
        first = next(q for q in ctx.counted if q.meta["phase"] in phase)
        assert first.used_before < DEMO_QUERY_BUDGET


def test_curves_number_each_samples_fixes_right_after_it(tmp_path):
    """PIKE's analysis order: phase by phase, sample by sample, each original followed by its fixes;
    the budget cut keeps the same attempts whichever order is used."""
    from pike_harness.host.store_db import curve_positions

    outcomes = {"p000/s00": failure(), "p000/s02": failure(), "p000/s00/fix1": failure()}
    ctx = run(tmp_path, limit=16, outcomes=outcomes, default_outcome=all_correct,
              config=PikeBConfig(num_branches=4))
    rows = [{"run": "r", "task": "t", "idx": q.index, "meta": q.meta, "key": q.key} for q in ctx.counted]
    assert [r["key"] for r in rows][:7] == ["p000/s00", "p000/s01", "p000/s02", "p000/s03",
                                            "p000/s00/fix1", "p000/s02/fix1", "p000/s00/fix2"]  # charge order
    curve_positions(rows)
    by_curve = [r["key"] for r in sorted(rows, key=lambda r: r["curve_idx"])]
    assert by_curve[:7] == ["p000/s00", "p000/s00/fix1", "p000/s00/fix2", "p000/s01", "p000/s02",
                            "p000/s02/fix1", "p000/s03"]
    assert sorted(r["curve_idx"] for r in rows) == sorted(r["idx"] for r in rows)
    assert [r["key"] for r in rows if r["curve_idx"] > 7] == [r["key"] for r in rows if r["idx"] > 7]
    foreign = [{"run": "r", "task": "u", "idx": 1, "meta": {"iteration": 0}, "key": "it0000"}]
    curve_positions(foreign)
    assert foreign[0]["curve_idx"] == 1  # strategies without phase/sample/fix keep the charge order
