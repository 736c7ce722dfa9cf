"""PIKE-O: OpenEvolve's island + MAP-Elites search with PIKE's changes, as PIKE's fork ran it.

One iteration = one parent drawn from the database, one optimize query (crossover or mutation
template, always a full rewrite), and, while its latest program fails, up to ``max_fix_attempts`` fix
queries (PIKE-O's own error-fixing prompt). The iteration's last program (the fixed one when a fix was
needed) joins its parent's island. Every query, fixes included, is counted.

**Iterations in flight.** As OpenEvolve with ``parallel_evaluations`` = W, about 2W iterations run at
once: ``max(1, 2W // islands)`` per island (W=20 and 3 islands: 13 each, 39 in all), each sampled from
the database as it stood when it started. An iteration's optimize query is sent by the search loop;
its fix queries follow in its own chain as soon as each verdict is in.

**Where we cannot follow OpenEvolve: completion order.** OpenEvolve adds each child the moment it
completes, so its runs are irreproducible. Here children are added in iteration order: when the oldest
iteration in flight has finished, its child is added, migration is checked, and a new iteration starts
on the first island with a free slot. A finished iteration whose predecessors are still running waits
to be added. The database, and so every draw and prompt, is then a function of the answers alone, so a
resumed run (which replays answers) rebuilds the same search, and one seed gives one run; only which
fix queries fit under the budget at its very end depends on the evaluator's timing (fix chains charge
as their verdicts arrive), so a deterministic evaluator order makes even that reproducible.

Keys: ``it{iteration:04d}`` for an iteration's query and ``it{iteration:04d}/fix{n}`` for its fixes;
``initial`` for the evaluation of the reference program.
"""

from __future__ import annotations

import random
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pike_harness.api import (
    FIX,
    OPTIMIZE,
    Attempt,
    BudgetExhausted,
    Strategy,
    Task,
    TaskContext,
    prompt_examples,
    prompt_pack,
)

from . import prompts
from .config import PikeOConfig
from .database import Program, ProgramDatabase
from .sampling import Draw, diverse_programs, inspirations, sample_parent, top_programs

INITIAL_KEY = "initial"
PREVIOUS_ATTEMPTS = 3  # OpenEvolve's "previous attempts" in the evolution history


def iteration_key(iteration: int) -> str:
    return f"it{iteration:04d}"


@dataclass
class Plan:
    """One iteration: where it was sampled, what it builds on, and what it shows the model."""

    iteration: int
    island: int
    draw: Draw
    tops: list[Program]
    inspirations: list[Program]
    diverse: list[Program] = field(default_factory=list)
    previous: list[Program] = field(default_factory=list)


class PikeO(Strategy):
    """Keys: ``initial`` (the reference's evaluation), ``it{i:04d}`` and ``it{i:04d}/fix{n}``."""

    name = "pike-o"
    description = ("PIKE-O (PIKE paper): OpenEvolve's islands + MAP-Elites search with in-iteration error "
                   "fixing; --preset selects the paper's ablations (mut, npar, 1isl, EO, SL, noEFA)")
    Config = PikeOConfig
    roles = (OPTIMIZE, FIX)
    config: PikeOConfig

    def overshoot(self) -> int:
        """None: an iteration starts, and a fix is sent, only while the task is below its budget."""
        return 0

    def run_task(self, ctx: TaskContext) -> None:
        cfg = self.config
        overrides = cfg.overrides()
        ctx.log(f"{ctx.task.ref}: pike-o preset {cfg.preset}"
                + (f" with {', '.join(f'{k}={v}' for k, v in overrides.items())}" if overrides else ""))
        db = self.new_database(ctx)
        ctx.set_status(phase=0, note="evaluating the reference")
        # The host already evaluated the reference for the eager baseline; reuse it when it is there.
        initial = getattr(ctx, "baseline", None) or ctx.evaluate(ctx.task.source, key=INITIAL_KEY)
        db.add_initial(ctx.task.source, initial)
        per_island = cfg.in_flight_per_island
        slots = per_island * cfg.params.num_islands
        in_flight: deque[tuple[Plan, Future[list[Attempt]]]] = deque()
        pending = [0] * cfg.params.num_islands
        next_iteration = 0
        stopped = False
        chains = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="pikeh-pike-o")
        try:

            def start(island: int) -> bool:
                nonlocal next_iteration
                if ctx.budget.exhausted:
                    return False
                plan = self._plan(ctx, db, next_iteration, island)
                try:
                    first = ctx.submit_attempt(OPTIMIZE, self._messages(ctx, plan), key=iteration_key(plan.iteration),
                                               parent=plan.draw.parent.key, meta={**self._meta(plan), "fix": 0})
                except BudgetExhausted:
                    return False
                in_flight.append((plan, chains.submit(self._chain, ctx, plan, first)))
                pending[island] += 1
                next_iteration += 1
                return True

            for island in range(cfg.params.num_islands):  # OpenEvolve's first batch: island 0's slots, then 1's...
                for _ in range(per_island):
                    stopped = stopped or not start(island)
            ctx.set_status(phase=0, note=f"{len(in_flight)} iterations in flight")
            while in_flight:
                plan, chain = in_flight.popleft()
                attempts = chain.result()
                pending[plan.island] -= 1
                self._incorporate(ctx, db, plan, attempts)
                if not stopped:
                    free = next((k for k in range(cfg.params.num_islands) if pending[k] < per_island), None)
                    stopped = free is None or not start(free)
                ctx.set_status(phase=plan.iteration + 1, note=f"{len(in_flight)} iterations in flight")
        finally:  # every chain has finished unless the run is stopping: then do not wait for them
            chains.shutdown(wait=False, cancel_futures=True)
        ctx.log(f"{ctx.task.ref}: {next_iteration} iterations; {db.summary()}")

    def sampling(self) -> dict[str, Any]:
        """PIKE-O's sampling: top_p 0.95 and no top_k (its config), over the run's temperature."""
        chosen: dict[str, Any] = {"top_p": self.config.top_p}
        if self.config.top_k >= 0:
            chosen["top_k"] = self.config.top_k
        return chosen

    def example_prompts(self, task: Task) -> list[prompt_examples.PromptExample]:
        """The first iteration's prompt (the reference as the current program, as PIKE-O starts; for
        crossover, with the reference's evaluation and nothing else yet), then the error-fixing prompt."""
        cfg = self.config
        reference = prompt_examples.REFERENCE_RUN
        current = prompts.Shown(task.source, 1.0 / (reference.runtime_ms or 1.0), (0, 0), reference)
        if cfg.params.template == "mutation":
            first = prompts.mutation_messages(task, task.source, prompt_pack.of(cfg))
        else:
            first = prompts.crossover_messages(task, current, [current], [], bins=cfg.params.feature_bins,
                                               tail_chars=cfg.params.log_tail_chars, pack=prompt_pack.of(cfg),
                                               previous=[current] if cfg.crossover_content == "pike" else [],
                                               content=cfg.crossover_content)
        shown = [prompt_examples.PromptExample(cfg.params.template, OPTIMIZE, first)]
        if cfg.params.max_fix_attempts:
            for name, result in (("efa_error", prompt_examples.CRASH), ("efa_incorrect", prompt_examples.WRONG)):
                messages = prompts.efa_messages(task, prompt_examples.FAILING, result, tail_chars=cfg.efa_tail_chars,
                                                pack=prompt_pack.of(cfg))
                shown.append(prompt_examples.PromptExample(name, FIX, messages))
        return shown

    def new_database(self, ctx: TaskContext) -> ProgramDatabase:
        """The task's database; PIKE's migration clock counts in the run's iterations (the query budget)."""
        return ProgramDatabase(self.config, rng=random.Random(ctx.rng.getrandbits(64)),
                               max_iterations=ctx.budget.query_limit)

    # -- one iteration -------------------------------------------------------------------------
    def _plan(self, ctx: TaskContext, db: ProgramDatabase, iteration: int, island: int) -> Plan:
        """Draw the iteration's parent (and, for crossover, what its prompt shows) from the database now."""
        cfg = self.config
        draw = sample_parent(db, island, ctx.rng, exploration=cfg.params.exploration_ratio,
                             exploitation=cfg.params.exploitation_ratio)
        plan = Plan(iteration, island, draw, [], [])
        if cfg.params.template == "crossover":
            plan.tops = top_programs(db, island, cfg.params.num_top_programs)
            shown = {p.id for p in plan.tops}
            if cfg.crossover_content == "pike":
                # The fork: previous attempts are the island's top programs again (no code); the diverse
                # ones are the next fittest, in random order; inspirations exclude only the parent.
                nearest = top_programs(db, island, cfg.params.num_top_programs + cfg.params.num_diverse_programs)
                plan.diverse = diverse_programs(db, island, cfg.params.num_diverse_programs, ctx.rng,
                                                exclude=shown, pool=nearest)
                plan.previous = plan.tops[:PREVIOUS_ATTEMPTS]
                excluded: set[str] = set()
            else:
                plan.diverse = diverse_programs(db, island, cfg.params.num_diverse_programs, ctx.rng, exclude=shown)
                plan.previous = db.recent(island, PREVIOUS_ATTEMPTS)
                excluded = shown | {p.id for p in plan.diverse}
            plan.inspirations = inspirations(db, draw.parent, island, cfg.params.num_inspirations, ctx.rng,
                                             elite_ratio=cfg.params.elite_selection_ratio, exclude=excluded)
        return plan

    def _meta(self, plan: Plan) -> dict[str, Any]:
        parent = plan.draw.parent
        return {
            "phase": plan.iteration, "iteration": plan.iteration, "island": plan.island,
            "child_island": parent.island, "template": self.config.params.template, "mode": plan.draw.mode,
            "pool": plan.draw.pool, "parent_id": parent.id, "parent_island": parent.island,
            "parent_is_reference": parent.is_reference, "top": [p.id for p in plan.tops],
            "diverse": [p.id for p in plan.diverse], "inspirations": [p.id for p in plan.inspirations],
        }

    def _messages(self, ctx: TaskContext, plan: Plan) -> list[dict[str, str]]:
        parent = plan.draw.parent
        if self.config.params.template == "mutation":
            return prompts.mutation_messages(ctx.task, parent.code, prompt_pack.of(self.config))
        return prompts.crossover_messages(
            ctx.task, _shown(parent), [_shown(p) for p in plan.tops], [_shown(p) for p in plan.inspirations],
            diverse=[_shown(p) for p in plan.diverse], previous=[_shown(p) for p in plan.previous],
            bins=self.config.params.feature_bins, tail_chars=self.config.params.log_tail_chars, pack=prompt_pack.of(self.config),
            content=self.config.crossover_content)

    def _chain(self, ctx: TaskContext, plan: Plan, first: Future[Attempt]) -> list[Attempt]:
        """The iteration's attempts: its optimize query, then fixes while the latest program fails.

        Each fix is sent only while the task is below its budget (the host refuses it otherwise)."""
        attempts = [first.result()]
        for number in range(1, self.config.params.max_fix_attempts + 1):
            latest = attempts[-1]
            if not latest.failed or latest.code is None or latest.result is None or ctx.budget.exhausted:
                break
            messages = prompts.efa_messages(ctx.task, latest.code, latest.result,
                                            tail_chars=self.config.efa_tail_chars, pack=prompt_pack.of(self.config))
            try:
                attempts.append(ctx.attempt(FIX, messages, key=f"{iteration_key(plan.iteration)}/fix{number}",
                                            parent=latest.key, meta={**self._meta(plan), "fix": number}))
            except BudgetExhausted:
                break
        return attempts

    def _incorporate(self, ctx: TaskContext, db: ProgramDatabase, plan: Plan, attempts: list[Attempt]) -> None:
        """Add the iteration's last program to its parent's island, migrating when it is due."""
        final = _final_program(attempts, keep_after_llm_failure=self.config.keep_after_llm_failure)
        if final is None:
            return  # the query (or, as in PIKE, one of its fixes) failed for good: no program
        db.add_child(final.key, final.code or "", final.result, plan.draw.parent.island, plan.iteration,
                     parent_fitness=plan.draw.parent.fitness)
        if db.should_migrate():
            migration = db.migrate()
            ctx.log(f"{ctx.task.ref}: migration {migration.number} after iteration {plan.iteration}: "
                    + (", ".join(f"{src}->island {target}" for src, _, target in migration.moves)
                       or "nothing new to copy"))


def _final_program(attempts: list[Attempt], *, keep_after_llm_failure: bool) -> Attempt | None:
    """The iteration's last attempt that produced a program and a verdict. A query that failed for good
    ends the iteration without a program in PIKE (its worker returns an error); with
    ``keep_after_llm_failure`` (ours) the last program before the failed fix is kept."""
    if attempts and attempts[-1].llm_error is not None and not keep_after_llm_failure:
        return None
    for attempt in reversed(attempts):
        if attempt.code is not None and attempt.result is not None:
            return attempt
    return None


def _shown(program: Program) -> prompts.Shown:
    return prompts.Shown(program.code, program.fitness, program.coords, program.result, program.parent_fitness)
