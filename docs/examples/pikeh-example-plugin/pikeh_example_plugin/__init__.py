"""An example pike-harness plugin: a complete strategy in one page, plus a one-task suite.

``one-shot`` asks the model once for a faster program and, if that program fails, lets the
error-fixing agent try up to ``max_fixes`` times. It shows everything a strategy needs: a Config
dataclass (its fields become ``pikeh run`` options), stable query keys (so a killed run resumes without
re-sending queries), and the shared PIKE prompts from ``pike_harness.kit.prompt_templates``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pike_harness.api import (
    BudgetExhausted,
    RegisterStrategy,
    RegisterSuite,
    Strategy,
    TaskContext,
    hookimpl,
    load_suite,
    prompt_templates,
)


@dataclass
class OneShotConfig:
    max_fixes: int = field(default=2, metadata={"help": "Error-fixing queries after a failed first try."})


class OneShot(Strategy):
    name = "one-shot"
    description = "One optimisation query per task, then up to max_fixes fix queries."
    Config = OneShotConfig

    def run_task(self, ctx: TaskContext) -> None:
        task = ctx.task
        try:
            attempt = ctx.attempt("optimize", prompt_templates.optimize_messages(task), key="first")
            for n in range(1, self.config.max_fixes + 1):
                if attempt.is_correct or ctx.budget.exhausted:
                    break
                ctx.set_status(note=f"fix {n}")
                if attempt.code is None or attempt.result is None:
                    break  # the query itself failed: there is no program to fix
                messages = prompt_templates.fix_messages(task, attempt.code, attempt.result)
                attempt = ctx.attempt("fix", messages, key=f"fix{n}", parent=attempt.key)
        except BudgetExhausted:
            return


@hookimpl
def register_strategies(register: RegisterStrategy) -> None:
    register(OneShot)


@hookimpl
def register_suites(register: RegisterSuite) -> None:
    register(load_suite(Path(__file__).parent / "tasks", name="example", origin="example"))
