"""best-of-n: independent samples from the reference, each failure repaired by the error-fixing agent.

The baseline every search should beat: no brainstorming, no parents, no memory between rounds. It
uses PIKE's prompts (the phase-0 prompt without an idea line, and the same fix prompt), so a
difference from PIKE-B measures the search, not the wording.
"""

from dataclasses import dataclass, field

from pike_harness.api import (
    FIX,
    OPTIMIZE,
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
class BestOfNConfig:
    parallel: int = field(default=10, metadata={
        "help": "independent optimize queries per round; a started round may overshoot the budget by "
                "this minus 1"})
    max_fix_attempts: int = field(default=5, metadata={
        "help": "error-fixing rounds after each round (each failing sample gets one fix per round); "
                "0 disables fixing"})
    log_tail_chars: int = field(default=failure_reports.LOG_TAIL_CHARS, metadata={
        "help": "characters from the end of stdout and of stderr shown to the error-fixing agent"})
    # The hash field first: once ``prompt_pack`` is a field name, the class body no longer sees the module.
    prompt_pack_sha256: str = prompt_pack.hash_option()
    prompt_pack: str = prompt_pack.pack_option()

    def __post_init__(self) -> None:
        require_at_least(self, parallel=1, max_fix_attempts=0, log_tail_chars=0)
        prompt_pack.attach(self, prompt_templates.load)


class BestOfN(Strategy):
    """Keys: ``r{round:03d}/s{slot:02d}`` and ``r{round:03d}/s{slot:02d}/fix{n}``."""

    name = "best-of-n"
    description = ("independent samples from the reference in rounds of --parallel queries; failures "
                   "get error-fixing rounds")
    Config = BestOfNConfig
    roles = (OPTIMIZE, FIX)
    config: BestOfNConfig

    def overshoot(self) -> int:
        return self.config.parallel - 1

    def example_prompts(self, task: Task) -> list[prompt_examples.PromptExample]:
        cfg = self.config
        return prompt_examples.pike_family(task, prompt_pack.of(cfg), brainstorm=False,
                                           improve=False, fix_context="pike" if cfg.max_fix_attempts else None,
                                           tail_chars=cfg.log_tail_chars)

    def run_task(self, ctx: TaskContext) -> None:
        cfg = self.config
        messages = prompt_templates.optimize_messages(ctx.task, pack=prompt_pack.of(cfg))
        number = 0
        while not ctx.budget.exhausted:
            ctx.set_status(phase=number, note="sample")
            samples = []
            orders = []
            for slot in range(cfg.parallel):
                key = f"r{number:03d}/s{slot:02d}"
                meta = {"round": number, "sample": slot}
                sample = Sample(slot, 0, key, meta)
                samples.append(sample)
                orders.append(Order(sample, OPTIMIZE, key, messages, None, {**meta, "fix": 0}))
            if not run_round(ctx, orders):
                return
            if not fix_rounds(ctx, samples, max_rounds=cfg.max_fix_attempts, tail_chars=cfg.log_tail_chars,
                              pack=prompt_pack.of(cfg)):
                return
            correct = sum(1 for s in samples if s.latest is not None and s.latest.is_correct)
            ctx.log(f"round {number}: {correct} correct of {len(samples)} samples")
            number += 1
