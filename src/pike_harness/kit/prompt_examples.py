"""Stand-in programs and verdicts for showing a strategy's prompts without running it.

``pikeh prompts show`` and the golden-prompt tests ask each strategy for every prompt it can send
(``Strategy.example_prompts``), built for a real task. The parts that only a run would supply (a parent
program, a failing program, what the evaluator said about it, a brainstormed idea) come from here, the
same for every strategy, so two strategies' prompts can be compared line by line and a prompt changes
only when its template or its builder does.
"""

from __future__ import annotations

from dataclasses import dataclass

from pike_harness.contracts.model import EvalResult, OutputCheck, Task
from pike_harness.kit import prompt_templates
from pike_harness.kit.prompt_pack import PromptPack

Messages = list[dict[str, str]]

IDEA = "<an idea from the brainstorming agent>"
PARENT = "# <a correct ModelNew program from an earlier attempt>\n"
FAILING = "# <a ModelNew program whose evaluation failed>\n"
CRASH = EvalResult(
    request_id="example",
    task="example",
    category="runtime_error",
    reason="<the evaluator's reason>",
    stdout_tail="<the end of the program's stdout>",
    stderr_tail="<the end of the program's stderr>",
)
REFERENCE_RUN = EvalResult(
    request_id="example",
    task="example",
    category="correct",
    runtime_ms=10.0,
    stdout_tail="<the end of the reference's stdout>",
)
WRONG = EvalResult(
    request_id="example",
    task="example",
    category="incorrect",
    reason="outputs differ",
    outputs=[
        OutputCheck(input_set=0, index=0, max_abs_diff=0.0123, ok=False),
        OutputCheck(input_set=0, index=1, max_abs_diff=0.0, ok=True),
    ],
)


@dataclass(frozen=True)
class PromptExample:
    """One prompt a strategy sends: its name (``optimize``, ``fix_incorrect``...), the role it is sent
    as, and the messages exactly as the LLM backend would get them."""

    name: str
    role: str
    messages: Messages


def pike_family(
    task: Task,
    pack: PromptPack,
    *,
    brainstorm: bool,
    improve: bool,
    fix_context: str | None,
    tail_chars: int,
    max_ideas: int = 10,
) -> list[PromptExample]:
    """The prompts of a strategy built on ``prompt_templates``: brainstorm (when used), optimize (with an
    idea when brainstorming), improve (when used), and the error-fixing prompts (``fix_context`` None:
    no fixes)."""
    shown: list[PromptExample] = []
    if brainstorm:
        shown.append(
            PromptExample(
                "brainstorm", "brainstorm", prompt_templates.brainstorm_messages(task, max_ideas, pack)
            )
        )
    shown.append(
        PromptExample(
            "optimize",
            "optimize",
            prompt_templates.optimize_messages(task, IDEA if brainstorm else None, pack),
        )
    )
    if improve:
        shown.append(
            PromptExample("improve", "optimize", prompt_templates.improve_messages(task, PARENT, pack))
        )
    if fix_context is not None:
        for name, result in (("fix_error", CRASH), ("fix_incorrect", WRONG)):
            messages = prompt_templates.fix_messages(
                task, FAILING, result, tail_chars=tail_chars, context=fix_context, pack=pack
            )
            shown.append(PromptExample(name, "fix", messages))
    return shown
