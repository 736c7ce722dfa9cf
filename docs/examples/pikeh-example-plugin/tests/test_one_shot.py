"""Tests of the example plugin, written with the helpers pike-harness ships (pike_harness.testing).

Run them with ``pytest tests`` in this folder (pike-harness and this plugin importable).
"""

from __future__ import annotations

import json
from pathlib import Path

import pikeh_example_plugin
from pikeh_example_plugin import OneShot, OneShotConfig

from pike_harness.testing import (
    FakeLLMServer,
    FakeReply,
    ScriptedContext,
    correct,
    failure,
    fake_evaluator_plugin,
    invoke,
    make_task,
)


def test_a_correct_first_program_needs_no_fix(tmp_path: Path):
    ctx = ScriptedContext(task=make_task(tmp_path), query_limit=10, outcomes={"first": correct(0.5)})
    OneShot(OneShotConfig(max_fixes=2)).run_task(ctx)
    assert ctx.issued_keys() == ["first"]


def test_a_failing_program_gets_max_fixes_fix_queries(tmp_path: Path):
    ctx = ScriptedContext(task=make_task(tmp_path), query_limit=10,
                          default_outcome=lambda key: failure("compile_error"))
    OneShot(OneShotConfig(max_fixes=2)).run_task(ctx)
    assert ctx.issued_keys() == ["first", "fix1", "fix2"]
    assert ctx.by_key("fix1").parent == "first" and ctx.by_key("fix1").role == "fix"


def test_the_budget_is_respected(tmp_path: Path):
    ctx = ScriptedContext(task=make_task(tmp_path), query_limit=2,
                          default_outcome=lambda key: failure("compile_error"))
    OneShot(OneShotConfig(max_fixes=5)).run_task(ctx)
    assert len(ctx.counted) == 2


def test_a_whole_run_through_the_host(tmp_path: Path, llm_server: FakeLLMServer):
    """`pikeh run` with this plugin, a real OpenAI SDK client against the fake server, and the fake
    evaluator: the host's run loop, journal and run.json, in a second."""
    program = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    llm_server.script("no code here", FakeReply.code(program))  # the first answer fails, the fix works
    result = invoke("run", "--strategy", "one-shot", "--suite", "example", "--llm", "openai:fake-model",
                    "--llm-base-url", llm_server.openai_base_url, "--evaluator", "fake",
                    "--output-dir", str(tmp_path), "--run-name", "example",
                    plugins={"example": pikeh_example_plugin, "fake-evaluator": fake_evaluator_plugin()},
                    env={"OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 0, result.output
    assert llm_server.count("openai") == 2
    run = json.loads((tmp_path / "example" / "run.json").read_text())
    assert run["plugins"]["strategy"]["plugin"] == "example"
    assert run["plugins"]["evaluator"]["plugin"] == "fake-evaluator"
    events = [json.loads(line) for line in (tmp_path / "example" / "journal.jsonl").read_text().splitlines()]
    assert [e["category"] for e in events if e.get("type") == "attempt"] == ["compile_error", "correct"]
