"""Prompts shared by the strategies that follow PIKE (PIKE-B, best-of-n, refine, PIKE-O's pieces).

One module builds them so that strategies compared against each other ask the model the same
questions: a difference in results then comes from the search, not from the prompt. The wording is not
here but in a prompt pack (``prompt_pack``): by default ``prompts/pike/`` next to this module, PIKE's
prompts in our words (the same instructions, the same kind of worked example, nothing added), and
``--prompt-pack DIR`` swaps in another. Every prompt is a pure function of the task, program texts and
failure reports; none takes a runtime or a speedup, so no prompt can leak one (PIKE-B's never show
timings).

Programs inside prompts are always fenced code blocks (``code_fences``), and each prompt kind carries a
fixed marker line of the default pack, so a test double (or an offline backend) can tell what is asked
and recover the quoted program (``prompt_kinds``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pike_harness.contracts.model import INCORRECT, REJECTED, TIMEOUT, EvalResult, Task
from pike_harness.kit.code_fences import fence
from pike_harness.kit.failure_reports import (
    LOG_TAIL_CHARS,
    PROMPT_REASON_CHARS,
    failure_report,
    first_set_differences,
    head_capped,
    log_tail,
)
from pike_harness.kit.prompt_pack import PromptPack, load_pack, pack_folders

# Marker lines of the default pack, one per prompt kind: text that fakes and offline backends match on.
BRAINSTORM_MARKER = "You are a brainstorming agent"
IMPROVE_MARKER = "You wrote this working solution earlier:"
FIX_MARKERS = ("The solution you wrote failed", "The solution architecture you wrote earlier:")
FOCUS_PREFIX = "Focus on this optimization task:"
REFERENCE_MARKER = "The architecture you are given:"

PIKE_PACK = Path(__file__).parent / "prompts" / "pike"
_CODE = frozenset({"problem", "example", "reference"})
# Every file of the pack and the placeholders its template may use (None: inserted verbatim).
SCHEMA: dict[str, frozenset[str] | None] = {
    "system.txt": frozenset(),
    "problem.txt": frozenset({"precision_rule"}),
    "example.txt": frozenset({"example_reference", "example_solution"}),
    "example_reference.py": None,
    "example_solution.py": None,
    "optimize.txt": _CODE | {"focus"},
    "focus.txt": frozenset({"idea"}),
    "improve.txt": _CODE | {"parent"},
    "fix_error.txt": _CODE | {"code", "rejected", "stdout", "stderr", "timed_out"},
    "fix_incorrect.txt": _CODE | {"code", "max_differences"},
    "fix_rich.txt": _CODE | {"code", "report"},
    "brainstorm.txt": frozenset({"example_reference", "reference", "max_ideas"}),
}


def load(folder: str | Path | None = None) -> PromptPack:
    """The PIKE prompt pack: ``folder`` (``--prompt-pack``) when given, else the shipped one."""
    return load_pack(pack_folders(folder, (PIKE_PACK,)), SCHEMA)


@cache
def default_pack() -> PromptPack:
    return load()


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
    return f"Precision: {rule}"


def problem_statement(task: Task, pack: PromptPack | None = None) -> str:
    """What every agent is told about the job (PIKE's problem statement): which operators may change and
    how; no tolerance and no rules beyond it (PIKE's prompts state none)."""
    return (pack or default_pack()).render("problem", precision_rule=precision_rule(task) or "")


def worked_example(pack: PromptPack | None = None) -> str:
    """PIKE's one-shot example: an elementwise add and its load_inline rewrite."""
    pack = pack or default_pack()
    return pack.render("example", example_reference=fence(pack.text("example_reference.py")),
                       example_solution=fence(pack.text("example_solution.py")))


def example_pair(pack: PromptPack | None = None) -> tuple[str, str]:
    """The worked example's reference and solution programs."""
    pack = pack or default_pack()
    return pack.text("example_reference.py"), pack.text("example_solution.py")


def messages(pack: PromptPack, user: str) -> Messages:
    """The system message (none when the pack's is empty: PIKE sent Gemini none) and the user's."""
    system = pack.text("system.txt").strip()
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": user.strip()}]


def _render(pack: PromptPack | None, template: str, task: Task, **values: str) -> Messages:
    pack = pack or default_pack()
    used = {"problem": problem_statement(task, pack), "reference": fence(task.source)}
    if "example" in (SCHEMA[template + ".txt"] or ()):
        used["example"] = worked_example(pack)
    return messages(pack, pack.render(template, **used, **values))


# -- the prompts ----------------------------------------------------------------------------------

def optimize_messages(task: Task, idea: str | None = None, pack: PromptPack | None = None) -> Messages:
    """PIKE-B phase 0 (and the first attempt of simpler strategies): rewrite the reference, optionally
    steered by one brainstormed idea."""
    focus = (pack or default_pack()).render("focus", idea=idea) if idea else ""
    return _render(pack, "optimize", task, focus=focus)


def improve_messages(task: Task, parent_code: str, pack: PromptPack | None = None) -> Messages:
    """PIKE-B later phases, refine: improve a program that already works."""
    return _render(pack, "improve", task, parent=fence(parent_code))


EFA_CONTEXTS = ("pike", "rich")


def fix_messages(task: Task, code: str, result: EvalResult, *, tail_chars: int = LOG_TAIL_CHARS,
                 context: str = "pike", pack: PromptPack | None = None) -> Messages:
    """The error-fixing agent: the failing program and what the evaluator said about it.

    ``context="pike"`` (the default) is PIKE's two prompts. A wrong output: the problem statement, the
    worked example, the reference, the failing code and the maximum absolute difference of each output,
    no logs. Any other failure: the problem statement, the reference, the failing code, the last
    ``tail_chars`` characters of stdout and of stderr and whether it timed out (and, for a program our
    evaluator rejected, the rule it broke: PIKE's evaluator had no such verdict). ``context="rich"``
    (ours) shows every failure the same way: ``failure_report`` (category, reason, per-output
    differences and both log tails). Either way a reason and each log tail are capped
    (``failure_reports.PROMPT_*_CHARS``) far above any real evaluation's, against a forged result.
    """
    if context not in EFA_CONTEXTS:
        raise ValueError(f"unknown error-fixing context {context!r}")
    failing = fence(code)
    if context == "rich":
        return _render(pack, "fix_rich", task, code=failing, report=failure_report(result, tail_chars=tail_chars))
    if result.category == INCORRECT:
        return _render(pack, "fix_incorrect", task, code=failing, max_differences=first_set_differences(result))
    rejected = (f"Our evaluator rejected it: {head_capped(result.reason, PROMPT_REASON_CHARS)}"
                if result.category == REJECTED and result.reason else "")
    return _render(pack, "fix_error", task, code=failing, rejected=rejected,
                   stdout=fence(log_tail(result.stdout_tail, tail_chars), "text"),
                   stderr=fence(log_tail(result.stderr_tail, tail_chars), "text"),
                   timed_out="True" if result.category == TIMEOUT else "False")


def brainstorm_messages(task: Task, max_ideas: int = 10, pack: PromptPack | None = None) -> Messages:
    """The brainstorming agent (PIKE's IBA): the example model with an example idea list, then the task;
    diverse tasks that can run in parallel, best first, at most ``max_ideas``, fewer allowed."""
    pack = pack or default_pack()
    return messages(pack, pack.render("brainstorm", example_reference=fence(pack.text("example_reference.py")),
                                      reference=fence(task.source), max_ideas=str(max_ideas)))
