"""PIKE-O: OpenEvolve's island + MAP-Elites search with PIKE's changes, as waves of iterations.

One iteration = one parent drawn from the database, one optimize query (crossover or mutation
template, always a full rewrite), and, while its latest program fails, up to ``max_fix_attempts`` fix
queries (PIKE-B's error-fixing agent). The iteration's last program (the fixed one when a fix was
needed) enters the database on the iteration's island. Every query, fixes included, is counted.

OpenEvolve keeps ``parallel_evaluations`` iterations in flight and adds each child as it completes.
Here the search advances in waves of that many iterations: a wave's parents are all drawn from the
database as it stood when the wave began (as in-flight iterations cannot see each other's children),
its queries and fix rounds run concurrently, and its children are added in iteration order once the
whole wave is in, so a resumed run (which replays answers) makes the same draws. With ``npar`` a wave
is one iteration: OpenEvolve's sequential loop exactly.

Keys: ``it{iteration:04d}`` for an iteration's query and ``it{iteration:04d}/fix{n}`` for its fixes;
``initial`` for the evaluation of the reference program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pike_harness.api import (
    FIX,
    OPTIMIZE,
    Attempt,
    Order,
    Sample,
    Strategy,
    TaskContext,
    fix_rounds,
    run_round,
)

from . import prompts
from .config import PikeOConfig
from .database import Program, ProgramDatabase
from .sampling import Draw, inspirations, sample_parent, top_programs

INITIAL_KEY = "initial"


def iteration_key(iteration: int) -> str:
    return f"it{iteration:04d}"


@dataclass
class Plan:
    """One iteration of a wave: where it runs, what it builds on, and what it shows the model."""

    iteration: int
    island: int
    draw: Draw
    tops: list[Program]
    inspirations: list[Program]


class PikeO(Strategy):
    """Keys: ``initial`` (the reference's evaluation), ``it{i:04d}`` and ``it{i:04d}/fix{n}``."""

    name = "pike-o"
    description = ("PIKE-O (PIKE paper): OpenEvolve's islands + MAP-Elites search with in-iteration error "
                   "fixing; --preset selects the paper's ablations (mut, npar, 1isl, EO, SL, noEFA)")
    Config = PikeOConfig
    roles = (OPTIMIZE, FIX)
    config: PikeOConfig

    def overshoot(self) -> int:
        return self.config.parallel_evaluations - 1

    def run_task(self, ctx: TaskContext) -> None:
        cfg = self.config
        overrides = cfg.overrides()
        ctx.log(f"{ctx.task.ref}: pike-o preset {cfg.preset}"
                + (f" with {', '.join(f'{k}={v}' for k, v in overrides.items())}" if overrides else ""))
        db = ProgramDatabase(cfg)
        ctx.set_status(phase=0, note="evaluating the reference")
        # The host already evaluated the reference for the eager baseline; reuse it when it is there.
        initial = getattr(ctx, "baseline", None) or ctx.evaluate(ctx.task.source, key=INITIAL_KEY)
        db.add_initial(ctx.task.source, initial)
        iteration = wave = 0
        while not ctx.budget.exhausted:
            size = min(cfg.parallel_evaluations, ctx.budget.queries_left)  # >= 1 while not exhausted
            ctx.set_status(phase=wave, note=f"iterations {iteration}-{iteration + size - 1}")
            plans = [self._plan(ctx, db, iteration + j) for j in range(size)]
            samples, orders = self._orders(ctx, wave, plans)
            finished = run_round(ctx, orders) and fix_rounds(
                ctx, samples, max_rounds=cfg.max_fix_attempts, tail_chars=cfg.log_tail_chars)
            self._incorporate(ctx, db, wave, plans, samples)
            if not finished:
                return
            iteration += size
            wave += 1

    # -- one wave ------------------------------------------------------------------------------
    def _plan(self, ctx: TaskContext, db: ProgramDatabase, iteration: int) -> Plan:
        """Draw the iteration's parent (and, for crossover, its top and inspiration programs)."""
        cfg = self.config
        island = iteration % cfg.num_islands
        draw = sample_parent(db, island, ctx.rng, exploration=cfg.exploration_ratio,
                             exploitation=cfg.exploitation_ratio)
        tops: list[Program] = []
        extra: list[Program] = []
        if cfg.template == "crossover":
            tops = top_programs(db, island, cfg.num_top_programs, exclude={draw.parent.id})
            extra = inspirations(db, draw.parent, island, cfg.num_inspirations, ctx.rng,
                                 elite_ratio=cfg.elite_selection_ratio, exclude={p.id for p in tops})
        return Plan(iteration, island, draw, tops, extra)

    def _orders(self, ctx: TaskContext, wave: int, plans: list[Plan]) -> tuple[list[Sample], list[Order]]:
        samples, orders = [], []
        for plan in plans:
            parent = plan.draw.parent
            key = iteration_key(plan.iteration)
            meta: dict[str, Any] = {
                "phase": wave, "iteration": plan.iteration, "island": plan.island,
                "template": self.config.template, "mode": plan.draw.mode, "pool": plan.draw.pool,
                "parent_id": parent.id, "parent_island": parent.island,
                "parent_is_reference": parent.is_reference,
                "top": [p.id for p in plan.tops], "inspirations": [p.id for p in plan.inspirations],
            }
            sample = Sample(slot=plan.iteration, branch=plan.island, key=key, meta=meta)
            samples.append(sample)
            orders.append(Order(sample, OPTIMIZE, key, self._messages(ctx, plan), parent.key,
                                {**meta, "fix": 0}))
        return samples, orders

    def _messages(self, ctx: TaskContext, plan: Plan) -> list[dict[str, str]]:
        parent = plan.draw.parent
        if self.config.template == "mutation":
            return prompts.mutation_messages(ctx.task, parent.code)
        return prompts.crossover_messages(ctx.task, _shown(parent), [_shown(p) for p in plan.tops],
                                          [_shown(p) for p in plan.inspirations],
                                          bins=self.config.feature_bins, tail_chars=self.config.log_tail_chars)

    def _incorporate(self, ctx: TaskContext, db: ProgramDatabase, wave: int, plans: list[Plan],
                     samples: list[Sample]) -> None:
        """Add each iteration's last program, in iteration order, migrating whenever it is due."""
        correct = 0
        for plan, sample in zip(plans, samples, strict=True):
            final = _final_program(sample.attempts)
            if final is None:
                continue  # the query failed for good (or was never sent): no program
            child = db.add_child(final.key, final.code or "", final.result, plan.island, plan.iteration)
            correct += child.fitness > 0
            if db.should_migrate():
                migration = db.migrate()
                ctx.log(f"{ctx.task.ref}: migration {migration.number} after iteration {plan.iteration}: "
                        + (", ".join(f"{src}->island {target}" for src, _, target in migration.moves)
                           or "nothing new to copy"))
        first, last = plans[0].iteration, plans[-1].iteration
        ctx.log(f"{ctx.task.ref}: wave {wave} (iterations {first}-{last}): {correct} correct of {len(plans)}; "
                f"{db.summary()}")


def _final_program(attempts: list[Attempt]) -> Attempt | None:
    """The iteration's last attempt that produced a program and a verdict."""
    for attempt in reversed(attempts):
        if attempt.code is not None and attempt.result is not None:
            return attempt
    return None


def _shown(program: Program) -> prompts.Shown:
    return prompts.Shown(program.code, program.fitness, program.coords, program.result)
