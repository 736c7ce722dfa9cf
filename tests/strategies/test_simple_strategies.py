"""best-of-n and refine against the scripted host."""

from __future__ import annotations

import typing

import pytest
from pikeh_simple_strategies import BestOfN, BestOfNConfig, Refine, RefineConfig

from pike_harness.api import UserError, prompt_kinds
from pike_harness.testing.context import (
    REFERENCE_SOURCE,
    ScriptedContext,
    correct,
    failure,
    make_task,
    program_for,
)


def run(tmp_path, strategy, *, limit: int, **ctx_args) -> ScriptedContext:
    ctx = ScriptedContext(make_task(tmp_path), limit, strategy.overshoot(), **ctx_args)
    strategy.run_task(ctx)
    return ctx


# -- best-of-n ------------------------------------------------------------------------------------

def test_best_of_n_samples_the_reference_in_rounds_without_brainstorming(tmp_path):
    ctx = run(tmp_path, BestOfN(), limit=30, default_outcome=lambda key: correct(1.0))
    assert [q.key for q in ctx.queries] == [f"r{r:03d}/s{s:02d}" for r in range(3) for s in range(10)]
    prompts = {q.prompt for q in ctx.queries}
    assert len(prompts) == 1  # every sample is an independent draw on the same prompt
    (prompt,) = prompts
    assert prompt_kinds.prompt_kind(prompt) == "optimize" and "Focus on" not in prompt
    assert all(q.role == "optimize" and q.parent is None for q in ctx.queries)


def test_best_of_n_fixes_only_failures_for_at_most_max_fix_attempts_rounds(tmp_path):
    outcomes = {"r000/s02": failure("runtime_error"), "r000/s02/fix1": failure("incorrect"),
                "r000/s02/fix2": correct(3.0), "r000/s05": failure("timeout")}

    def outcome(key):
        return failure("compile_error") if key.startswith("r000/s05") else correct(1.0)

    ctx = run(tmp_path, BestOfN(BestOfNConfig(max_fix_attempts=3)), limit=20, outcomes=outcomes,
              default_outcome=outcome)
    fixes = [q.key for q in ctx.queries if q.role == "fix"]
    assert fixes == ["r000/s02/fix1", "r000/s05/fix1", "r000/s02/fix2", "r000/s05/fix2", "r000/s05/fix3"]
    assert ctx.by_key("r000/s02/fix2").quoted == program_for("r000/s02/fix1")
    assert [q.key for q in ctx.queries if q.meta.get("round") == 1 and q.role == "optimize"] == \
        [f"r001/s{s:02d}" for s in range(10)]


@pytest.mark.parametrize("limit", [1, 7, 10, 23])
def test_best_of_n_rounds_respect_the_budget(tmp_path, limit):
    strategy = BestOfN(BestOfNConfig(parallel=4))
    ctx = run(tmp_path, strategy, limit=limit, default_outcome=lambda key: failure("compile_error"))
    assert strategy.overshoot() == 3
    assert limit <= len(ctx.counted) <= limit + 3
    starts: dict[tuple[int, int], int] = {}
    for q in ctx.counted:
        starts.setdefault((q.meta["round"], q.meta["fix"]), q.used_before)
    assert all(used < limit for used in starts.values())


def test_best_of_n_without_fixes(tmp_path):
    ctx = run(tmp_path, BestOfN(BestOfNConfig(max_fix_attempts=0)), limit=20)
    assert {q.role for q in ctx.queries} == {"optimize"} and len(ctx.queries) == 20


# -- refine ---------------------------------------------------------------------------------------

def test_refine_improves_the_fastest_correct_program_so_far(tmp_path):
    outcomes = {
        "step000": failure("compile_error"), "step000/fix1": failure("compile_error"),
        "step000/fix2": correct(5.0),
        "step001": correct(7.0),  # slower: the best stays step000/fix2
        "step002": correct(5.0),  # a tie keeps the earlier program
        "step003": correct(2.0),  # faster: becomes the base
        "step004": failure("runtime_error"),
    }
    ctx = run(tmp_path, Refine(RefineConfig(max_fix_attempts=2)), limit=10, outcomes=outcomes,
              default_outcome=lambda key: failure("incorrect"))
    assert ctx.issued_keys() == ["step000", "step000/fix1", "step000/fix2", "step001", "step002", "step003",
                          "step004", "step004/fix1", "step004/fix2", "step005"]
    first = ctx.by_key("step000")
    assert prompt_kinds.prompt_kind(first.messages) == "optimize" and first.parent is None
    assert ctx.by_key("step000/fix2").quoted == program_for("step000/fix1")
    for key, base in [("step001", "step000/fix2"), ("step002", "step000/fix2"), ("step003", "step000/fix2"),
                      ("step004", "step003"), ("step005", "step003")]:
        query = ctx.by_key(key)
        assert prompt_kinds.prompt_kind(query.messages) == "improve", key
        assert query.quoted == program_for(base) and query.parent == base, key


def test_refine_rewrites_the_reference_until_something_is_correct(tmp_path):
    ctx = run(tmp_path, Refine(RefineConfig(max_fix_attempts=0)), limit=4)
    assert ctx.issued_keys() == ["step000", "step001", "step002", "step003"]
    assert all(prompt_kinds.prompt_kind(q.messages) == "optimize" for q in ctx.queries)
    assert all(REFERENCE_SOURCE in q.prompt and q.quoted is None for q in ctx.queries)


@pytest.mark.parametrize("limit", [1, 3, 8, 13])
def test_refine_never_overshoots(tmp_path, limit):
    strategy = Refine()
    ctx = run(tmp_path, strategy, limit=limit, default_outcome=lambda key: failure("runtime_error"))
    assert strategy.overshoot() == 0
    assert len(ctx.counted) == limit
    assert max(len(q.key.split("/fix")) for q in ctx.queries) <= 2
    assert all(int(q.key.rsplit("fix", 1)[1]) <= 5 for q in ctx.queries if "/fix" in q.key)


# -- shared -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [BestOfN, Refine])
def test_simple_strategies_are_deterministic_and_configurable(tmp_path, cls):
    def outcome(key):
        n = sum(map(ord, key))
        return correct(1 + n % 5) if n % 2 else failure("runtime_error")

    traces = []
    for completion, seed in (("reverse", 0), ("shuffle", 3)):
        ctx = run(tmp_path, cls(), limit=40, default_outcome=outcome, completion=completion, seed=seed)
        traces.append([(q.key, q.parent, q.prompt) for q in ctx.queries])
    assert traces[0] == traces[1]
    hints = typing.get_type_hints(cls.Config)
    for f in cls.config_fields():
        assert f.metadata.get("help") and hints[f.name] in (bool, int, float, str, str | None), f.name
    assert set(cls.roles) == {"optimize", "fix"}


@pytest.mark.parametrize("config, bad", [(BestOfNConfig, {"parallel": 0}), (BestOfNConfig, {"max_fix_attempts": -1}),
                                         (RefineConfig, {"max_fix_attempts": -1}),
                                         (RefineConfig, {"log_tail_chars": -1})])
def test_simple_configs_reject_impossible_values(config, bad):
    with pytest.raises(UserError, match="--" + next(iter(bad)).replace("_", "-")):
        config(**bad)
