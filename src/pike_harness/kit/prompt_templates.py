"""Prompts shared by the strategies that follow PIKE (PIKE-B, best-of-n, refine, PIKE-O).

One module owns the wording so that strategies compared against each other ask the model the same
questions: a difference in results then comes from the search, not from the prompt. Every prompt is a
pure function of the task and of program texts and failure reports; none takes a runtime or a speedup,
so no prompt can leak one (PIKE's prompts never show timings, and ours must stay comparable).

Programs inside prompts are always fenced code blocks (``code_fences``), and each prompt kind carries a
fixed marker line, so a test double (or an offline backend) can tell what is asked and recover the
quoted program (``prompt_kinds``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pike_harness.contracts.model import INCORRECT, REJECTED, TIMEOUT, EvalResult, Task
from pike_harness.kit.code_fences import fence
from pike_harness.kit.failure_reports import LOG_TAIL_CHARS, failure_report, log_tails, max_difference

# Marker lines, one per prompt kind: stable text that fakes and offline backends may match on.
BRAINSTORM_MARKER = "Brainstorm optimization ideas before any code is written."
IMPROVE_MARKER = "You previously wrote this working solution:"
FIX_MARKER = "The program below failed evaluation and needs to be fixed:"
FOCUS_PREFIX = "Focus on:"
REFERENCE_MARKER = "The reference program to optimize (`Model`):"

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


# -- building blocks ------------------------------------------------------------------------------

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
    return f"{REFERENCE_MARKER}\n{fence(task.source)}"


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
                 f"difference: {max_difference(result)}."]
    else:
        report = [f"Timed out: {'yes' if result.category == TIMEOUT else 'no'}"]
        if result.category == REJECTED and result.reason:
            report.insert(0, f"The evaluator rejected it: {result.reason}")
        report += log_tails(result, tail_chars)
        parts = [problem_statement(task), reference_section(task), failing,
                 "It failed to compile or to run. " + "\n".join(report)]
    parts += ["Fix the program so that it builds, runs and produces correct outputs, keeping the custom "
              "kernels fast.", output_instruction("the complete fixed program")]
    return _messages(parts)


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


def _messages(parts: Sequence[str]) -> Messages:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
