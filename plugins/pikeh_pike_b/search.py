"""PIKE-B: brainstormed ideas, phases of branching optimize queries, and error-fixing rounds.

The rules are PIKE-B's, as the PIKE paper and its code define them; docs/strategies.md states them
with our budget semantics. This module has no ``from __future__ import annotations`` on purpose: the
host reads the Config field types to build CLI options, and real types are easier to read than
strings.
"""

from dataclasses import dataclass, field
from typing import Any

from pike_harness.api import (
    BRAINSTORM,
    FIX,
    OPTIMIZE,
    Order,
    PromptRefusedError,
    Sample,
    Strategy,
    Task,
    TaskContext,
    UserError,
    failure_reports,
    fix_rounds,
    idea_lists,
    prompt_examples,
    prompt_pack,
    prompt_templates,
    require_at_least,
    run_round,
)

from .selection import FASTEST, PARENT_RULES, Parent, Solution, rank_parents, split_evenly


@dataclass
class PikeBConfig:
    """PIKE-B's parameters; the defaults are the paper's."""

    num_branches: int = field(default=10, metadata={
        "help": "code-optimization queries per phase; a started round may overshoot the budget by this minus 1"})
    max_parents: int = field(default=4, metadata={
        "help": "parents per phase: the fastest correct children of the previous phase"})
    parents: str = field(default=FASTEST, metadata={
        "help": "parent rule: fastest (PIKE's: the max-parents fastest correct programs of the phase, "
                "several may share a branch) or spread (ours: the fastest of each branch first)"})
    max_fix_attempts: int = field(default=5, metadata={
        "help": "error-fixing rounds per phase (each failing sample gets one fix per round); "
                "0 is the paper's no-EFA variant"})
    brainstorm: bool = field(default=True, metadata={
        "help": "ask the brainstorming agent for ideas before phase 0 (one idea per phase-0 query); "
                "off is the paper's no-IBA variant; a brainstorm prompt the provider refuses (too long, "
                "content) leaves that task's phase 0 as if off"})
    max_ideas: int = field(default=10, metadata={
        "help": "how many ideas the brainstorming prompt asks for (the list is then cut or repeated "
                "to num_branches)"})
    max_phases: int = field(default=0, metadata={
        "help": "stop after this many phases; 0 runs phases while the query budget lasts "
                "(ceil(budget / num_branches) at most)"})
    efa_context: str = field(default="pike", metadata={
        "help": "error-fixing prompt: pike (PIKE's two prompts: the maximum output difference and the "
                "worked example for wrong outputs, the log tails for other failures) or rich (ours: "
                "category, reason, per-output differences and log tails for every failure)"})
    log_tail_chars: int = field(default=failure_reports.LOG_TAIL_CHARS, metadata={
        "help": "characters from the end of stdout and of stderr shown to the error-fixing agent"})
    # The hash field first: once ``prompt_pack`` is a field name, the class body no longer sees the module.
    prompt_pack_sha256: str = prompt_pack.hash_option()
    prompt_pack: str = prompt_pack.pack_option()

    def __post_init__(self) -> None:
        require_at_least(self, num_branches=1, max_parents=1, max_fix_attempts=0, max_ideas=1, max_phases=0,
                         log_tail_chars=0)
        if self.efa_context not in prompt_templates.EFA_CONTEXTS:
            raise UserError(f"--efa-context must be one of {', '.join(prompt_templates.EFA_CONTEXTS)} "
                            f"(got {self.efa_context!r})")
        if self.parents not in PARENT_RULES:
            raise UserError(f"--parents must be one of {', '.join(PARENT_RULES)} (got {self.parents!r})")
        prompt_pack.attach(self, prompt_templates.load)


class PikeB(Strategy):
    """Keys: ``brainstorm``, ``p{phase:03d}/s{slot:02d}`` for optimize queries and
    ``p{phase:03d}/s{slot:02d}/fix{n}`` for the n-th fix of that sample.

    A brainstorm prompt the provider refuses (``PromptRefusedError``) does not end the task: phase 0
    goes on without ideas, as under ``--no-brainstorm``. Any other failure of the brainstorm call (an
    ``LLMError``, a reply without ideas) still ends the task, which has nothing to start from.
    """

    name = "pike-b"
    description = ("PIKE-B (PIKE paper): brainstormed ideas, phases of branching optimize queries over the "
                   "fastest children of the previous phase, error-fixing rounds")
    Config = PikeBConfig
    roles = (BRAINSTORM, OPTIMIZE, FIX)
    config: PikeBConfig

    def overshoot(self) -> int:
        return self.config.num_branches - 1

    def run_task(self, ctx: TaskContext) -> None:
        cfg = self.config
        reference = Parent(None, ctx.task.source)
        ideas: list[str | None] = self._ideas(ctx) if cfg.brainstorm else [None] * cfg.num_branches
        parents: list[Parent] = []
        phase = 0
        while not ctx.budget.exhausted and (cfg.max_phases == 0 or phase < cfg.max_phases):
            ctx.set_status(phase=phase, note="optimize")
            samples, orders = self._plan(ctx, phase, ideas, parents)
            if not run_round(ctx, orders):
                return
            if not fix_rounds(ctx, samples, max_rounds=cfg.max_fix_attempts, tail_chars=cfg.log_tail_chars,
                              context=cfg.efa_context, pack=prompt_pack.of(cfg)):
                return
            solutions = _solutions(samples)
            parents = rank_parents(solutions, reference, cfg.max_parents, cfg.parents)
            ctx.log(f"phase {phase}: {len(solutions)} correct of {len(samples)} samples; next parents: "
                    + ", ".join(p.key or "reference" for p in parents))
            phase += 1

    def example_prompts(self, task: Task) -> list[prompt_examples.PromptExample]:
        cfg = self.config
        return prompt_examples.pike_family(task, prompt_pack.of(cfg), brainstorm=cfg.brainstorm, improve=True,
                                           fix_context=cfg.efa_context if cfg.max_fix_attempts else None,
                                           tail_chars=cfg.log_tail_chars, max_ideas=cfg.max_ideas)

    def _ideas(self, ctx: TaskContext) -> list[str | None]:
        """The brainstorming call: uncounted (its cost is still recorded by the host).

        A prompt the provider refuses (``PromptRefusedError``: longer than the model's context window,
        or content it will not process) leaves the task without ideas: phase 0 then sends the prompts
        it sends under ``--no-brainstorm``. The host journals the refusal, so a resume (which does not
        ask the prompt again) takes the same path.
        """
        ctx.set_status(phase=0, note="brainstorm")
        messages = prompt_templates.brainstorm_messages(ctx.task, self.config.max_ideas, prompt_pack.of(self.config))
        try:
            reply = ctx.ask(BRAINSTORM, messages, key="brainstorm", counted=False)
        except PromptRefusedError as exc:
            ctx.log(f"brainstorm: the provider refused the prompt ({exc}); phase 0 goes on without ideas")
            return [None] * self.config.num_branches
        ideas = idea_lists.parse_ideas(reply.text)
        if not ideas:
            ctx.log("brainstorm: the reply held no bullet-line ideas; the task cannot start")
        return list(idea_lists.fit_ideas(ideas, self.config.num_branches))

    def _plan(self, ctx: TaskContext, phase: int, ideas: list[str | None],
              parents: list[Parent]) -> tuple[list[Sample], list[Order]]:
        """The phase's optimize queries: one per idea in phase 0, else the parents' shares in rank order."""
        task = ctx.task
        n = self.config.num_branches
        samples: list[Sample] = []
        orders: list[Order] = []
        plan: list[tuple[int, int, Parent | None, str | None]]
        if phase == 0:
            plan = [(slot, slot, None, ideas[slot]) for slot in range(n)]
        else:
            chosen = parents[:n] or [Parent(None, task.source)]
            plan = []
            for branch, share in enumerate(split_evenly(n, len(chosen))):
                plan.extend((len(plan), branch, chosen[branch], None) for _ in range(share))
        for slot, branch, parent, idea in plan:
            key = f"p{phase:03d}/s{slot:02d}"
            meta: dict[str, Any] = {"phase": phase, "sample": slot, "branch": branch}
            if parent is None:
                messages = prompt_templates.optimize_messages(task, idea, prompt_pack.of(self.config))
                if idea is not None:
                    meta["idea"] = idea
            else:
                messages = prompt_templates.improve_messages(task, parent.code, prompt_pack.of(self.config))
                meta["parent_is_reference"] = parent.key is None
            sample = Sample(slot, branch, key, meta)
            samples.append(sample)
            orders.append(Order(sample, OPTIMIZE, key, messages, parent.key if parent else None,
                                {**meta, "fix": 0}))
        return samples, orders


def _solutions(samples: list[Sample]) -> list[Solution]:
    """Every correct attempt of the phase, original or fixed."""
    found = []
    for sample in samples:
        for fix, attempt in enumerate(sample.attempts):
            if attempt.is_correct and attempt.code is not None and attempt.runtime_ms is not None:
                found.append(Solution(attempt.key, attempt.code, attempt.runtime_ms, sample.branch,
                                      (sample.slot, fix)))
    return found
