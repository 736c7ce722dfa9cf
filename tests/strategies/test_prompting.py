"""The shared prompts and reply parsers (pike_harness.kit: prompt_templates, failure_reports, code_fences, idea_lists, prompt_kinds)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pike_harness.api import (
    EvalResult,
    TaskMeta,
    code_fences,
    failure_reports,
    idea_lists,
    prompt_kinds,
    prompt_templates,
)
from pike_harness.contracts.model import OutputCheck
from pike_harness.testing.context import REFERENCE_SOURCE, failure, make_task

# -- code extraction ------------------------------------------------------------------------------

@pytest.mark.parametrize("reply, code", [
    ("Here:\n```python\nx = 1\n```\nDone.", "x = 1\n"),
    ("```\nx = 1\n```", "x = 1\n"),
    ("```cuda\n__global__ void k() {}\n```\n```python\nx = 1\n```", "__global__ void k() {}\n"),
    ("~~~py\nx = 1\n~~~", "x = 1\n"),
    ("````python\ns = '''\n```\n'''\n````", "s = '''\n```\n'''\n"),
    ("````\na\n```\nb\n````", "a\n```\nb\n"),
    ("~~~\na\n```\nb\n~~~", "a\n```\nb\n"),
    ("```python\nimport torch\nclass ModelNew", "import torch\nclass ModelNew\n"),  # truncated reply
    ("Intro\r\n```python\r\nx = 1\r\ny = 2\r\n```\r\n", "x = 1\ny = 2\n"),
    ("1. Step:\n  ```python\n  def f():\n      return 1\n  ```", "def f():\n    return 1\n"),
    ("```python title=\"model.py\"\nx = 1\n```", "x = 1\n"),
    ("```python\n```\n```python\nx = 1\n```", ""),  # the first block counts even when it is empty
])
def test_extract_code_takes_the_first_fenced_block(reply, code):
    assert code_fences.extract_code(reply) == code


@pytest.mark.parametrize("reply, code", [
    ("import torch\nclass ModelNew: pass\n", "import torch\nclass ModelNew: pass\n"),
    ("\n\n  x = 1  \n\n", "x = 1\n"),
    ("Use ```python``` blocks, like ```x```.", "Use ```python``` blocks, like ```x```.\n"),
    ("", ""),
])
def test_extract_code_falls_back_to_the_whole_reply(reply, code):
    assert code_fences.extract_code(reply) == code


@pytest.mark.parametrize("code", [
    "x = 1\n",
    'def f():\n    """Example:\n    ```python\n    f()\n    ```\n    """\n',
    "s = '````'\nt = '```'\n",
    "no trailing newline",
])
def test_fenced_code_survives_a_round_trip(code):
    reply = "Answer:\n" + code_fences.fence(code) + "\nThat is all."
    assert code_fences.extract_code(reply) == (code if code.endswith("\n") else code + "\n")


# -- ideas ----------------------------------------------------------------------------------------

def test_parse_ideas_reads_bullets_of_every_common_kind():
    reply = """Here are my ideas:

- Fuse the scale and the tanh into one kernel.
* Use vectorized float4 loads.
+ Cache the weights in shared memory.
• Launch with a grid-stride loop.
1. Replace the reduction with a warp shuffle.
2) Capture the forward pass in a CUDA graph.

These should help a lot.
"""
    assert idea_lists.parse_ideas(reply) == [
        "Fuse the scale and the tanh into one kernel.", "Use vectorized float4 loads.",
        "Cache the weights in shared memory.", "Launch with a grid-stride loop.",
        "Replace the reduction with a warp shuffle.", "Capture the forward pass in a CUDA graph.",
    ]


def test_parse_ideas_joins_continuations_and_sub_bullets_and_skips_code_and_rules():
    reply = """**Ideas**
---
- Fuse everything
  into a single kernel
    - including the bias add
- Use Triton for the matmul
```python
- not an idea: this is inside a code block
```
Closing remark that is not an idea.
  - Indented after a remark: still a bullet at a deeper level, so ignored
"""
    assert idea_lists.parse_ideas(reply) == [
        "Fuse everything into a single kernel including the bias add",
        "Use Triton for the matmul",
    ]


def test_parse_ideas_handles_uniformly_indented_lists_and_empty_replies():
    assert idea_lists.parse_ideas("  - a\n  - b\n") == ["a", "b"]
    assert idea_lists.parse_ideas("No bullets here.\nNone at all.") == []
    assert idea_lists.parse_ideas("") == []
    assert idea_lists.parse_ideas("-\n- \n-- x\n- real") == ["real"]


def test_fit_ideas_cuts_or_repeats_to_exactly_the_count():
    assert idea_lists.fit_ideas(["a", "b", "c"], 7) == ["a", "b", "c", "a", "b", "c", "a"]
    assert idea_lists.fit_ideas([str(i) for i in range(12)], 10) == [str(i) for i in range(10)]
    assert idea_lists.fit_ideas(["a"], 1) == ["a"]
    with pytest.raises(idea_lists.NoIdeasError):
        idea_lists.fit_ideas([], 10)
    assert issubclass(idea_lists.NoIdeasError, ValueError)


# -- prompts --------------------------------------------------------------------------------------

@pytest.fixture
def task(tmp_path: Path):
    return make_task(tmp_path, meta=TaskMeta(atol=1e-5, rtol=1e-3, precision="fp32"))


def test_problem_statement_states_the_job_but_no_tolerance_and_no_precision_by_default(task, tmp_path):
    """PIKE's problem statement: which operators may change and how; no tolerance and no precision rule
    (the tolerance alone judges a candidate, and PIKE never stated it)."""
    text = prompt_templates.problem_statement(task)
    for phrase in ("custom CUDA or Triton kernels", "fusion", "online softmax", "built-in PyTorch functions"):
        assert phrase in text, phrase
    for word in ("Precision", "precision", "float16", "bfloat16", "TF32", "atol", "rtol", "1e-05"):
        assert word not in text, word
    silent = {prompt_templates.problem_statement(make_task(tmp_path, meta=TaskMeta(precision=p, atol=a)))
              for p in ("fp32", "tf32", "bf16", "fp16") for a in (1e-2, 1e-4)}
    assert len(silent) == 1  # neither the precision floor nor the tolerance changes the prompt
    assert prompt_templates.precision_rule(task) is None


def test_stated_precision_rule_tells_the_model_the_tasks_floor(tmp_path):
    statements = {p: prompt_templates.problem_statement(make_task(tmp_path, meta=TaskMeta(precision=p,
                                                                                   precision_rule="stated")))
                  for p in ("fp32", "tf32", "bf16", "fp16")}
    assert len(set(statements.values())) == 4
    assert "do not compute in TF32, float16 or bfloat16" in statements["fp32"]
    assert "bfloat16" in statements["bf16"] and "TF32 tensor-core math is allowed" in statements["tf32"]


def test_optimize_prompt_has_pikes_statement_example_reference_instruction_and_idea(task):
    messages = prompt_templates.optimize_messages(task, "fuse the scale into the tanh")
    assert messages[0] == {"role": "system", "content": "You are a helpful assistant."}
    user = messages[1]["content"]
    blocks = code_fences.code_blocks(user)
    example_reference, example_solution = prompt_templates.example_pair()
    assert blocks == [example_reference + "\n", example_solution + "\n", REFERENCE_SOURCE]
    assert "significantly" in user and "errors and correctness problems will be fixed" in user
    assert user.endswith("Focus on this optimization task: fuse the scale into the tanh")
    assert prompt_kinds.prompt_kind(messages) == "optimize"
    assert prompt_kinds.quoted_program(messages) is None
    assert "Focus on" not in prompt_templates.optimize_messages(task)[1]["content"]


def test_improve_prompt_quotes_the_parent_verbatim(task):
    parent = 'class ModelNew:\n    """Uses ```fences``` in a docstring\n```\n"""\n'
    messages = prompt_templates.improve_messages(task, parent)
    user = messages[1]["content"]
    assert prompt_kinds.prompt_kind(messages) == "improve"
    assert prompt_kinds.quoted_program(messages) == parent
    assert "improve performance significantly" in user and REFERENCE_SOURCE in code_fences.code_blocks(user)


WRONG = EvalResult(request_id="r", task="t", category="incorrect", reason="outputs differ",
                   outputs=[OutputCheck(0, 0, max_abs_diff=0.1), OutputCheck(1, 0, max_abs_diff=0.7),
                            OutputCheck(0, 1, problem="shape (4,) != (4, 1)")],
                   stdout_tail="", stderr_tail="warning: slow path")


def test_pikes_wrong_output_fix_prompt_lists_each_outputs_max_difference_with_the_example_but_no_logs(task):
    messages = prompt_templates.fix_messages(task, "broken = True\n", WRONG)
    user = messages[1]["content"]
    assert prompt_kinds.prompt_kind(messages) == "fix"
    assert prompt_kinds.quoted_program(messages) == "broken = True\n"
    blocks = code_fences.code_blocks(user)
    assert REFERENCE_SOURCE in blocks and prompt_templates.example_pair()[1] + "\n" in blocks
    # Each output's difference on the public input set (as PIKE's one-input check saw it); a hidden
    # set's (0.7) would differ at every evaluation and tell the model about inputs it must not see.
    assert "The largest difference of each output: [0.1, None]" in user and "0.7" not in user
    assert "error tolerance" in user
    assert "slow path" not in user and "stdout" not in user and "Timed out" not in user


def test_pikes_error_fix_prompt_has_the_log_tails_and_the_timeout_but_no_example(task):
    crash = failure("runtime_error", stdout_tail="printed", stderr_tail="e" * 50 + "LAST")
    user = prompt_templates.fix_messages(task, "broken = True\n", crash, tail_chars=10)[1]["content"]
    assert prompt_templates.example_pair()[1] + "\n" not in code_fences.code_blocks(user)
    assert REFERENCE_SOURCE in user
    assert "Timed out: False" in user and "printed" in user and "eeeeeeLAST" in user and "e" * 7 + "LAST" not in user
    assert "Timed out: True" in prompt_templates.fix_messages(task, "x = 1\n", failure("timeout"))[1]["content"]
    rejected = prompt_templates.fix_messages(task, "x = 1\n", failure("rejected", reason="input 0 changed"))
    assert "Our evaluator rejected it: input 0 changed" in rejected[1]["content"]


def test_rich_fix_prompt_reports_every_failure_detail(task):
    messages = prompt_templates.fix_messages(task, "broken = True\n", WRONG, context="rich")
    user = messages[1]["content"]
    assert prompt_kinds.quoted_program(messages) == "broken = True\n"
    assert REFERENCE_SOURCE in code_fences.code_blocks(user)
    assert "output 0: max abs diff 0.7" in user and "output 1: shape (4,) != (4, 1)" in user
    assert "Timed out: no" in user and "stdout: (empty)" in user and "warning: slow path" in user
    assert "incorrect output" in user and "Reason: outputs differ" in user
    with pytest.raises(ValueError):
        prompt_templates.fix_messages(task, "x\n", WRONG, context="verbose")


def test_failure_report_variants():
    timeout = failure_reports.failure_report(failure("timeout", stdout_tail="x" * 50), tail_chars=0)
    assert "Timed out: yes" in timeout and "stdout: (not shown)" in timeout
    rejected = failure_reports.failure_report(failure("rejected", check="inputs_mutated", reason="input 0 changed"))
    assert "Failed check: inputs_mutated" in rejected and "input 0 changed" in rejected
    bare = failure_reports.failure_report(EvalResult(request_id="r", task="t", category="incorrect"))
    assert "Per-output differences: not available." in bare


# What one forged result (a hostile candidate's, with one output) may put into a fix prompt: every cap,
# and the rest of the prompt (about 1,400 characters with this task), with room for the cut notes.
RESULT_BOUND = (failure_reports.PROMPT_REASON_CHARS + failure_reports.PROMPT_CHECK_CHARS
                + failure_reports.PROMPT_PROBLEM_CHARS + 2 * failure_reports.PROMPT_LOG_CHARS + 5_000)
HUGE = 3_000_000


def uncut(category: str, **texts: object) -> EvalResult:
    """A result carrying ``texts`` as they are: set after it was made, past the cut every result makes of
    its strings (worker/records.py), as a result made by other code could carry them. The prompts' own
    caps must hold whatever a result says."""
    result = failure(category)
    for name, value in texts.items():
        setattr(result, name, value)
    return result


@pytest.mark.parametrize("context", prompt_templates.EFA_CONTEXTS)
@pytest.mark.parametrize("category", ["rejected", "runtime_error"])
def test_a_result_with_megabytes_of_text_gives_a_bounded_fix_prompt(task, context, category):
    forged = uncut(category, reason="REASON-HEAD " + "r" * HUGE, check="CHECK-HEAD " + "c" * HUGE,
                   stdout_tail="o" * HUGE + " STDOUT-END", stderr_tail="e" * HUGE + " STDERR-END",
                   outputs=[OutputCheck(input_set=0, index=0, problem="PROBLEM-HEAD " + "p" * HUGE)])
    user = prompt_templates.fix_messages(task, "x = 1\n", forged, context=context, tail_chars=10**9)[1]["content"]
    assert len(user) < RESULT_BOUND
    assert "STDOUT-END" in user and "STDERR-END" in user
    if category == "rejected" or context == "rich":
        assert "REASON-HEAD" in user and f"[cut: the first 24,000 of {HUGE + 12:,} characters]" in user


def test_an_ordinary_result_is_never_cut_and_a_wrongly_typed_one_is_shown_as_text(task):
    # The longest real reason (a 2,000-character exception summary behind a prefix) and a log tail as the
    # supervisor keeps it (10,000 characters), both of control characters, which the result escapes to 4
    # characters each (and cuts to 20,000 and a note): shown whole, the result's own note included.
    ordinary = failure("rejected", reason="forward: RuntimeError: " + "\x1b" * 2_000, check="calls_reference_model",
                       stderr_tail="\x1b" * 10_000)
    assert len(ordinary.reason) > 8_000 and len(ordinary.stderr_tail) > 20_000
    assert ordinary.reason in prompt_templates.fix_messages(task, "x\n", ordinary, tail_chars=10**9)[1]["content"]
    report = failure_reports.failure_report(ordinary, tail_chars=10**9)
    assert ordinary.reason in report and ordinary.stderr_tail in report
    assert "[cut: the first 24,000" not in report and "[cut: the last 40,000" not in report, "no cut of the prompt's own"
    odd = uncut("rejected", reason={"not": "text"}, check=["neither"], stdout_tail=None)
    report = failure_reports.failure_report(odd)
    assert "Reason: {'not': 'text'}" in report and "Failed check: ['neither']" in report
    assert "stdout: (empty)" in report


def test_brainstorm_prompt_is_pikes_example_model_and_idea_list_then_the_task(task):
    messages = prompt_templates.brainstorm_messages(task, max_ideas=7)
    user = messages[1]["content"]
    assert prompt_kinds.prompt_kind(messages) == "brainstorm"
    assert "At most 7 ideas" in user and "best ideas first" in user and "in parallel" in user
    assert "A shorter list is fine" in user and "performance engineers" in user
    blocks = code_fences.code_blocks(user)
    assert blocks[0] == prompt_templates.example_pair()[0] + "\n" and blocks[-1] == REFERENCE_SOURCE
    example_ideas = idea_lists.parse_ideas(blocks[1])
    assert len(example_ideas) == 4 and any("coalesced" in idea for idea in example_ideas)
    for word in ("atol", "tolerance", "Rules", "Triton"):  # CUDA only, no rules, as PIKE's
        assert word not in user, word


def test_prompt_kind_is_none_for_foreign_text():
    assert prompt_kinds.prompt_kind("What is the capital of France?") is None
    assert prompt_kinds.prompt_kind([]) is None
    assert prompt_kinds.quoted_program("no markers") is None


def test_the_worked_example_is_a_valid_task_and_solution_pair():
    example_reference, example_solution = prompt_templates.example_pair()
    reference = ast.parse(example_reference)
    solution = ast.parse(example_solution)
    ref_names = {n.name for n in reference.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    sol_names = {n.name for n in solution.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    assert {"Model", "get_inputs", "get_init_inputs"} <= ref_names
    assert "ModelNew" in sol_names and "load_inline" in example_solution


@pytest.mark.gpu
@pytest.mark.slow
def test_the_worked_example_builds_and_matches_on_a_gpu():
    """The example teaches the answer format: it must itself build and give the reference's output."""
    import torch

    example_reference, example_solution = prompt_templates.example_pair()
    ref_ns: dict = {}
    exec(compile(example_reference, "example_reference.py", "exec"), ref_ns)
    sol_ns: dict = {}
    exec(compile(example_solution, "example_solution.py", "exec"), sol_ns)
    inputs = [t.cuda() for t in ref_ns["get_inputs"]()]
    expected = ref_ns["Model"](*ref_ns["get_init_inputs"]()).cuda()(*inputs)
    got = sol_ns["ModelNew"](*ref_ns["get_init_inputs"]()).cuda()(*inputs)
    torch.cuda.synchronize()
    assert torch.equal(got, expected)
