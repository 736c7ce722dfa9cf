"""refine: one sequential chain that keeps improving the best correct program found so far.

KernelBench's multi-turn setting, with PIKE's prompts and without runtimes in the prompt: each step
asks for an improvement of the fastest correct program so far (the first steps, while there is none,
rewrite the reference), and a failed step is repaired by up to ``max_fix_attempts`` sequential fixes.
One query at a time, so it never overshoots the budget.
"""

from dataclasses import dataclass, field

from pike_harness.api import (
    FIX,
    OPTIMIZE,
    Attempt,
    Order,
    Sample,
    Strategy,
    Task,
    TaskContext,
    failure_reports,
    fix_rounds,
    prompt_examples,
    prompt_pack,
    prompt_templates,
    require_at_least,
    run_round,
)


@dataclass
class RefineConfig:
    max_fix_attempts: int = field(default=5, metadata={
        "help": "fix queries a failed step may get, one after another; 0 disables fixing"})
    log_tail_chars: int = field(default=failure_reports.LOG_TAIL_CHARS, metadata={
        "help": "characters from the end of stdout and of stderr shown to the error-fixing agent"})
    # The hash field first: once ``prompt_pack`` is a field name, the class body no longer sees the module.
    prompt_pack_sha256: str = prompt_pack.hash_option()
    prompt_pack: str = prompt_pack.pack_option()

    def __post_init__(self) -> None:
        require_at_least(self, max_fix_attempts=0, log_tail_chars=0)
        prompt_pack.attach(self, prompt_templates.load)


class Refine(Strategy):
    """Keys: ``step{n:03d}`` and ``step{n:03d}/fix{k}``."""

    name = "refine"
    description = ("one sequential chain: each step improves the fastest correct program so far (the "
                   "reference at first); failures get fix queries")
    Config = RefineConfig
    roles = (OPTIMIZE, FIX)
    config: RefineConfig

    def overshoot(self) -> int:
        return 0

    def example_prompts(self, task: Task) -> list[prompt_examples.PromptExample]:
        cfg = self.config
        return prompt_examples.pike_family(task, prompt_pack.of(cfg), brainstorm=False,
                                           improve=True, fix_context="pike" if cfg.max_fix_attempts else None,
                                           tail_chars=cfg.log_tail_chars)

    def run_task(self, ctx: TaskContext) -> None:
        cfg = self.config
        best: Attempt | None = None
        step = 0
        while not ctx.budget.exhausted:
            ctx.set_status(phase=step, note="refine")
            key = f"step{step:03d}"
            meta = {"step": step, "sample": 0}
            if best is None:
                messages = prompt_templates.optimize_messages(ctx.task, pack=prompt_pack.of(cfg))
            else:
                messages = prompt_templates.improve_messages(ctx.task, best.code or "", prompt_pack.of(cfg))
            sample = Sample(0, 0, key, meta)
            order = Order(sample, OPTIMIZE, key, messages, best.key if best else None, {**meta, "fix": 0})
            if not run_round(ctx, [order]):
                return
            finished = fix_rounds(ctx, [sample], max_rounds=cfg.max_fix_attempts, tail_chars=cfg.log_tail_chars,
                              pack=prompt_pack.of(cfg))
            latest = sample.latest
            if latest is not None and latest.is_correct and _faster(latest, best):
                best = latest
                ctx.log(f"step {step}: new best {latest.key}")
            if not finished:
                return
            step += 1


def _faster(candidate: Attempt, best: Attempt | None) -> bool:
    """Strictly faster replaces the best; a tie keeps the earlier program (a stable rule for replay)."""
    if best is None:
        return True
    assert candidate.runtime_ms is not None and best.runtime_ms is not None
    return candidate.runtime_ms < best.runtime_ms
