"""Prompts shared by the strategies that follow PIKE (PIKE-B, best-of-n, refine, PIKE-O), and the parsers
for what comes back.

One module owns the wording so that strategies compared against each other ask the model the same
questions: a difference in results then comes from the search, not from the prompt. Every prompt is a
pure function of the task and of program texts and failure reports; none takes a runtime or a speedup,
so no prompt can leak one (PIKE's prompts never show timings, and ours must stay comparable).

Programs inside prompts are always fenced code blocks, and each prompt kind carries a fixed marker
line, so a test double (or an offline backend) can tell what is asked and recover the quoted program
with ``prompt_kind`` and ``quoted_program``. The host extracts code from every reply with
``extract_code``; strategies should not re-implement it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pike_harness.contracts.model import INCORRECT, REJECTED, TIMEOUT, EvalResult, Task

__all__ = [
    "BRAINSTORM_MARKER",
    "EXAMPLE_REFERENCE",
    "EFA_CONTEXTS",
    "EXAMPLE_SOLUTION",
    "FIX_MARKER",
    "FOCUS_PREFIX",
    "IMPROVE_MARKER",
    "LOG_TAIL_CHARS",
    "NoIdeasError",
    "SYSTEM_PROMPT",
    "brainstorm_messages",
    "code_blocks",
    "extract_code",
    "failure_report",
    "fence",
    "fit_ideas",
    "fix_messages",
    "improve_messages",
    "optimize_messages",
    "output_instruction",
    "parse_ideas",
    "precision_rule",
    "problem_statement",
    "prompt_kind",
    "quoted_program",
    "reference_section",
    "worked_example",
]

# PIKE shows the error-fixing agent the last 10,000 characters of each log stream.
LOG_TAIL_CHARS = 10_000

# Marker lines, one per prompt kind: stable text that fakes and offline backends may match on.
BRAINSTORM_MARKER = "Brainstorm optimization ideas before any code is written."
IMPROVE_MARKER = "You previously wrote this working solution:"
FIX_MARKER = "The program below failed evaluation and needs to be fixed:"
FOCUS_PREFIX = "Focus on:"
_REFERENCE_MARKER = "The reference program to optimize (`Model`):"

SYSTEM_PROMPT = (
    "You are an expert GPU performance engineer. You make PyTorch models faster by writing custom "
    "CUDA kernels and Triton kernels, and you answer with complete, runnable Python programs."
)

EXAMPLE_REFERENCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds two tensors elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(4096, 1024), torch.randn(4096, 1024)]


def get_init_inputs():
    return []
'''

EXAMPLE_SOLUTION = '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

torch::Tensor elementwise_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat, "float32 only");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    long n = a_c.numel();
    const int threads = 256;
    const long blocks = (n + threads - 1) / threads;
    auto stream = at::cuda::getCurrentCUDAStream();
    add_kernel<<<blocks, threads, 0, stream>>>(a_c.data_ptr<float>(), b_c.data_ptr<float>(),
                                               out.data_ptr<float>(), n);
    return out;
}
"""

add_declaration = "torch::Tensor elementwise_add(torch::Tensor a, torch::Tensor b);"

add_extension = load_inline(
    name="example_elementwise_add",
    cpp_sources=add_declaration,
    cuda_sources=add_source,
    functions=["elementwise_add"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_extension.elementwise_add(a, b)
'''

_PRECISION_RULES = {
    "fp32": "keep full float32 accuracy: do not compute in TF32, float16 or bfloat16 (in Triton, "
            "pass input_precision=\"ieee\" to tl.dot, whose default is TF32).",
    "tf32": "TF32 tensor-core math is allowed; float16 and bfloat16 computation is not.",
    "bf16": "reduced precision is allowed down to bfloat16 (TF32 or bfloat16 computation); float16 is not.",
    "fp16": "reduced precision is allowed down to float16 (TF32, bfloat16 or float16 computation).",
}

Messages = list[dict[str, str]]


class NoIdeasError(ValueError):
    """The brainstorming agent's reply held no idea: the task cannot start its first phase."""


# -- building blocks ------------------------------------------------------------------------------

def fence(code: str, lang: str = "python") -> str:
    """Wrap ``code`` in a fenced block whose fence is longer than any backtick run inside it, so a
    program that itself contains ``` (in a docstring or a kernel comment) is quoted intact."""
    longest = max((len(run) for run in re.findall(r"`{3,}", code)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = code if code.endswith("\n") else code + "\n"
    return f"{ticks}{lang}\n{body}{ticks}"


def precision_rule(task: Task) -> str | None:
    """The prompt's precision line, or None under PIKE's rule (``precision_rule = "tolerance"``).

    PIKE's prompts say nothing about precision: any computation whose outputs pass the tolerance is
    correct (22 of PIKE-B's 37 published best level-3 programs compute in float16). Only the
    ``stated`` rule (a suite's or a run's option, ``--precision-rule stated``) tells the model the
    task's lowest allowed precision.
    """
    meta = task.meta
    if meta.precision_rule != "stated":
        return None
    rule = _PRECISION_RULES.get(meta.precision, f"the lowest allowed precision is {meta.precision}.")
    return f"- Precision: {rule}"


def problem_statement(task: Task) -> str:
    """What every agent is told about the job: what may change, what must stay, how it is checked."""
    meta = task.meta
    precision = precision_rule(task)
    return "\n".join(line for line in [
        "Write a faster version of a PyTorch program for an NVIDIA GPU. Replace PyTorch operators of the "
        "reference model with custom CUDA kernels (compiled from Python with "
        "torch.utils.cpp_extension.load_inline) or with Triton kernels, and name the new model class "
        "`ModelNew`.",
        "You choose which operators to replace. Operator fusion (several operators in one kernel), "
        "algorithmic changes (such as an online softmax) and keeping or calling built-in PyTorch "
        "operators where they are the faster choice are all allowed.",
        "",
        "Rules:",
        "- `ModelNew` takes the same constructor arguments as `Model`, and its `forward` takes the same "
        "inputs and returns the same outputs (same shapes and dtypes, as plain tensors on the GPU).",
        f"- Outputs must match the reference within atol={meta.atol:g} and rtol={meta.rtol:g} "
        "(torch.allclose), on inputs made like get_inputs() but with random seeds you do not know.",
        precision,
        "- Both models are built under the same random seed, so create parameters in the same order "
        "and with the same shapes as `Model` does (keeping its nn.Linear / nn.Conv2d modules is the "
        "simple way) to get the same weights.",
        "- Do not import or call the reference `Model`, and do not special-case particular inputs.",
    ] if line is not None)


def worked_example() -> str:
    """PIKE's one-shot example: an elementwise add and its load_inline rewrite."""
    return "\n".join([
        "Example. For this reference program:",
        fence(EXAMPLE_REFERENCE),
        "a valid answer is:",
        fence(EXAMPLE_SOLUTION),
    ])


def reference_section(task: Task) -> str:
    return f"{_REFERENCE_MARKER}\n{fence(task.source)}"


def output_instruction(what: str = "the complete program defining `ModelNew`") -> str:
    """The answer format every code-writing prompt ends with; the host takes the first fenced block."""
    return (
        f"Answer with {what} (imports, kernel sources, the `ModelNew` class) in one fenced code block "
        "```python ... ```. Only the first code block of your reply is used. get_inputs() and "
        "get_init_inputs() are not needed, and the program should not run tests or print."
    )


# -- the prompts ----------------------------------------------------------------------------------

def optimize_messages(task: Task, idea: str | None = None) -> Messages:
    """PIKE-B phase 0 (and the first attempt of simpler strategies): rewrite the reference, optionally
    steered by one brainstormed idea."""
    parts = [problem_statement(task), worked_example(), reference_section(task), output_instruction()]
    if idea:
        parts.append(f"{FOCUS_PREFIX} {idea}")
    return _messages(parts)


def improve_messages(task: Task, parent_code: str) -> Messages:
    """PIKE-B later phases, PIKE-O's mutation template, refine: improve a program that already works."""
    parts = [
        problem_statement(task),
        worked_example(),
        reference_section(task),
        f"{IMPROVE_MARKER}\n{fence(parent_code)}",
        "Make changes to this solution that significantly improve its performance, while keeping its "
        "outputs correct.",
        output_instruction("the complete improved program"),
    ]
    return _messages(parts)


EFA_CONTEXTS = ("pike", "rich")


def fix_messages(task: Task, code: str, result: EvalResult, *, tail_chars: int = LOG_TAIL_CHARS,
                 context: str = "pike") -> Messages:
    """The error-fixing agent: the failing program and what the evaluator said about it.

    ``context="pike"`` (the default) is PIKE's two prompts. A wrong output: the problem statement, the
    worked example, the reference, the failing code and the maximum absolute difference of the
    outputs, no logs. Any other failure: the problem statement, the reference, the failing code,
    whether it timed out and the last ``tail_chars`` characters of stdout and of stderr (and, for a
    program our evaluator rejected, the rule it broke). ``context="rich"`` (ours) shows every failure
    the same way: ``failure_report`` (category, reason, per-output differences and both log tails).
    """
    if context not in EFA_CONTEXTS:
        raise ValueError(f"unknown error-fixing context {context!r}")
    failing = f"{FIX_MARKER}\n{fence(code)}"
    if context == "rich":
        parts = [problem_statement(task), reference_section(task), failing,
                 failure_report(result, tail_chars=tail_chars)]
    elif result.category == INCORRECT:
        parts = [problem_statement(task), worked_example(), reference_section(task), failing,
                 "The program runs, but its outputs differ from the reference's. Maximum absolute "
                 f"difference: {_max_difference(result)}."]
    else:
        report = [f"Timed out: {'yes' if result.category == TIMEOUT else 'no'}"]
        if result.category == REJECTED and result.reason:
            report.insert(0, f"The evaluator rejected it: {result.reason}")
        report += _log_tails(result, tail_chars)
        parts = [problem_statement(task), reference_section(task), failing,
                 "It failed to compile or to run. " + "\n".join(report)]
    parts += ["Fix the program so that it builds, runs and produces correct outputs, keeping the custom "
              "kernels fast.", output_instruction("the complete fixed program")]
    return _messages(parts)


def _max_difference(result: EvalResult) -> str:
    """On the first input set (the public one, as PIKE's one-input check saw it) when it was compared:
    the hidden sets are drawn anew per evaluation, so their differences would make the same failure
    give a different prompt each time (a replay or the response cache would then miss) and would tell
    the model about inputs it must not see."""
    compared = [o for o in result.outputs if o.max_abs_diff is not None]
    first = min((o.input_set for o in compared), default=None)
    diffs = [o.max_abs_diff for o in compared if o.input_set == first]
    return f"{max(diffs):.6g}" if diffs else "not available"


def brainstorm_messages(task: Task, max_ideas: int = 10) -> Messages:
    """The brainstorming agent (PIKE's IBA): framed as brainstorming with performance engineers, with
    PIKE's short list of example low-level ideas; ideas only, one bullet line each, so ``parse_ideas``
    can split them."""
    parts = [
        problem_statement(task),
        reference_section(task),
        BRAINSTORM_MARKER,
        "You are brainstorming with a team of performance engineers who will write the kernels. Examples "
        "of the low-level ideas they work with: memory coalescing, avoiding shared-memory bank conflicts, "
        "tiling.",
        f"List up to {max_ideas} distinct ideas for making this program faster. Write each idea as one "
        "bullet line starting with \"- \", one idea per line, with no code and no other text.",
    ]
    return _messages(parts)


def failure_report(result: EvalResult, *, tail_chars: int = LOG_TAIL_CHARS) -> str:
    """How a failed evaluation is described to the error-fixing agent.

    Only failure facts: the category, the evaluator's reason, whether it timed out, per-output
    differences for wrong outputs, and the tails of the logs. Never a runtime.
    """
    lines = [f"Evaluation result: {_CATEGORY_WORDS.get(result.category, result.category)}."]
    if result.reason:
        lines.append(f"Reason: {result.reason}")
    if result.category == REJECTED and result.check:
        lines.append(f"Failed check: {result.check}")
    lines.append(f"Timed out: {'yes' if result.category == TIMEOUT else 'no'}")
    if result.category == INCORRECT or any(o.max_abs_diff is not None or o.problem for o in result.outputs):
        lines.extend(_output_differences(result))
    lines += _log_tails(result, tail_chars)
    return "\n".join(lines)


def _log_tails(result: EvalResult, tail_chars: int) -> list[str]:
    """The last ``tail_chars`` characters of stdout and of stderr, each in a fenced block."""
    lines = []
    for name, text in (("stdout", result.stdout_tail), ("stderr", result.stderr_tail)):
        tail = text[-tail_chars:] if tail_chars > 0 else ""
        if not tail.strip():
            lines.append(f"{name}: (empty)" if not text.strip() else f"{name}: (not shown)")
        elif len(tail) < len(text):
            lines.append(f"{name} (the last {len(tail)} of {len(text)} characters):\n{fence(tail, 'text')}")
        else:
            lines.append(f"{name}:\n{fence(tail, 'text')}")
    return lines


_CATEGORY_WORDS = {
    "compile_error": "compile error (the program failed to import or its kernels failed to build)",
    "runtime_error": "runtime error (the program raised an exception or crashed while running)",
    "timeout": "timeout (the program did not finish within the time limit)",
    "incorrect": "incorrect output (the program ran but its outputs differ from the reference)",
    "rejected": "rejected (the program broke an evaluation rule)",
}


def _output_differences(result: EvalResult) -> list[str]:
    """Per output: the largest absolute difference over all input sets, or the problem found."""
    worst: dict[int, float] = {}
    problems: dict[int, str] = {}
    for check in result.outputs:
        if check.max_abs_diff is not None:
            worst[check.index] = max(worst.get(check.index, check.max_abs_diff), check.max_abs_diff)
        if check.problem and check.index not in problems:
            problems[check.index] = check.problem
    if not worst and not problems:
        return ["Per-output differences: not available."]
    lines = ["Maximum absolute difference from the reference, per output:"]
    for index in sorted(set(worst) | set(problems)):
        parts = []
        if index in worst:
            parts.append(f"max abs diff {worst[index]:.6g}")
        if index in problems:
            parts.append(problems[index])
        lines.append(f"- output {index}: {'; '.join(parts)}")
    return lines


def _messages(parts: Sequence[str]) -> Messages:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# -- reading replies ------------------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")


def code_blocks(text: str) -> list[str]:
    """Every fenced code block of a Markdown text, in order (CommonMark fences: ``` or ~~~, three or
    more, up to three spaces of indent; an unclosed fence runs to the end, as in a truncated reply)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if not match or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        indent, marker = len(match["indent"]), match["fence"]
        closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(_dedent(lines[i], indent))
            i += 1
        i += 1  # skip the closing fence (or step past the end)
        blocks.append("\n".join(body) + "\n" if body else "")
    return blocks


def _dedent(line: str, indent: int) -> str:
    removable = len(line) - len(line.lstrip(" "))
    return line[min(indent, removable):]


def extract_code(text: str) -> str:
    """The program in a reply: its first fenced code block of any language tag, else the whole reply."""
    blocks = code_blocks(text)
    if blocks:
        return blocks[0]
    stripped = text.strip()
    return stripped + "\n" if stripped else ""


_BULLET = re.compile(r"^(?P<indent>\s*)(?:[-*+\u2022\u2023\u25e6\u2043]|\d{1,3}[.)])\s+(?P<text>\S.*)$")


def parse_ideas(text: str) -> list[str]:
    """The brainstorming reply's bullet lines as a list of ideas.

    A bullet is ``-``, ``*``, ``+``, ``•`` or ``1.``/``1)`` followed by text. Bullets at the list's
    outermost indentation start ideas; deeper bullets and indented plain lines continue the current
    idea (models wrap long ideas and add sub-points); an unindented plain line ends it, so a closing
    remark is not glued onto the last idea. Lines inside fenced code blocks are ignored.
    """
    lines = _outside_fences(text)
    bullets = [m for m in (_BULLET.match(line) for line in lines) if m]
    if not bullets:
        return []
    top = min(len(m["indent"].expandtabs(4)) for m in bullets)
    ideas: list[list[str]] = []
    open_idea = False
    for line in lines:
        if not line.strip():
            continue
        match = _BULLET.match(line)
        indent = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
        if match and indent <= top:
            ideas.append([match["text"].strip()])
            open_idea = True
        elif open_idea and indent > top:
            ideas[-1].append(match["text"].strip() if match else line.strip())
        else:
            open_idea = False
    return [" ".join(parts) for parts in ideas]


def _outside_fences(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    closing: re.Pattern[str] | None = None
    for line in lines:
        if closing is not None:
            if closing.match(line):
                closing = None
            continue
        match = _FENCE_OPEN.match(line)
        if match and not (match["fence"][0] == "`" and "`" in match["info"]):
            marker = match["fence"]
            closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
            continue
        kept.append(line)
    return kept


def fit_ideas(ideas: Sequence[str], count: int) -> list[str]:
    """Exactly ``count`` ideas: the first ``count``, or the list repeated in order until long enough."""
    if not ideas:
        raise NoIdeasError("the brainstorming reply contained no bullet-line ideas")
    return [ideas[i % len(ideas)] for i in range(count)]


# -- recognising prompts (for test doubles and offline backends) ----------------------------------

def prompt_kind(messages: Sequence[dict[str, str]] | str) -> str | None:
    """``"brainstorm"``, ``"fix"``, ``"improve"`` or ``"optimize"`` for a prompt built here, else None."""
    text = messages if isinstance(messages, str) else _user_text(messages)
    if BRAINSTORM_MARKER in text:
        return "brainstorm"
    if FIX_MARKER in text:
        return "fix"
    if IMPROVE_MARKER in text:
        return "improve"
    if _REFERENCE_MARKER in text:
        return "optimize"
    return None


def quoted_program(messages: Sequence[dict[str, str]] | str) -> str | None:
    """The program an improve or fix prompt quotes (the parent, or the failing code), verbatim."""
    text = messages if isinstance(messages, str) else _user_text(messages)
    for marker in (FIX_MARKER, IMPROVE_MARKER):
        head, found, rest = text.partition(marker + "\n")
        if found:
            blocks = code_blocks(rest)
            return blocks[0] if blocks else None
    return None


def _user_text(messages: Sequence[dict[str, str]]) -> str:
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""
