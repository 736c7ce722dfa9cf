"""Turning `pikeh run` options into a running ``Runner``: validation first, then the run, then a summary.

Everything a user can get wrong (unknown strategy, task, provider or evaluator; a missing API key; a
money budget on an unpriced model; a changed configuration) is caught here, before any query is sent.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pike_harness.errors import UserError
from pike_harness.evaluation import EvaluatorOptions
from pike_harness.llm import BackendOptions
from pike_harness.progress import RunProgress
from pike_harness.run import RunConfig, Runner
from pike_harness.store import RunStore


def build_config(core: dict[str, Any], strategy_values: dict[str, Any], evaluator_values: dict[str, Any],
                 strategy_cls: type) -> RunConfig:
    """``evaluator_values`` as ``pop_evaluator_values`` returns them: evaluator, device, protocol,
    timeout, workdir and the plugin's own options under ``extra``."""
    try:
        strategy_config = strategy_cls.Config(**{k: v for k, v in strategy_values.items() if v is not None})
    except TypeError as exc:
        raise UserError(f"bad options for strategy {strategy_cls.name!r}: {exc}") from None
    extra = {k: (str(v) if isinstance(v, Path) else v)
             for k, v in (evaluator_values.get("extra") or {}).items() if v is not None}
    if evaluator_values.get("workdir"):
        extra["workdir"] = str(evaluator_values["workdir"])
    return RunConfig(
        strategy=core["strategy"], suite=core["suite"], llm=core["llm"], tasks=core.get("tasks"),
        fix_llm=core.get("fix_llm"), query_budget=int(core.get("query_budget") or 300),
        money_budget=core.get("money_budget"), evaluator=evaluator_values.get("evaluator") or "local",
        device=evaluator_values.get("device") or "auto", protocol=evaluator_values.get("protocol") or "robust",
        seed=int(core.get("seed") or 0), temperature=core.get("temperature"),
        max_tokens=int(core.get("max_tokens") or 32_000), reasoning_effort=core.get("reasoning_effort"),
        timeout_s=evaluator_values.get("timeout"), strategy_options=dataclasses.asdict(strategy_config),
        llm_base_url=core.get("llm_base_url"), llm_concurrency=int(core.get("llm_concurrency") or 10),
        llm_cache=str(core["llm_cache"]) if core.get("llm_cache") else None,
        replay_dir=str(core["replay_dir"]) if core.get("replay_dir") else None, evaluator_options=extra,
    )


def build_llm_client(config: RunConfig, host: Any) -> Any:
    from pike_harness.llm_client import LLMClient

    extra = {"replay_dir": config.replay_dir} if config.replay_dir else {}
    role_models = {"fix": config.fix_llm} if config.fix_llm else {}
    client = LLMClient(config.llm, role_models=role_models, host=host,
                       options=BackendOptions(base_url=config.llm_base_url, extra=extra),
                       max_concurrency=config.llm_concurrency, reasoning_effort=config.reasoning_effort,
                       cache_dir=Path(config.llm_cache) if config.llm_cache else None, seed=config.seed)
    if config.money_budget is not None:
        for spec in {config.llm, *role_models.values()}:
            if not client.costs_known(spec):
                raise UserError(f"--money-budget needs prices, and {spec} has none; add it to a prices file "
                                "(PIKEH_PRICES, see docs/llm.md) or drop --money-budget")
    return client


def launch_run(app: Any, core: dict[str, Any], strategy_values: dict[str, Any], evaluator_values: dict[str, Any],
               *, console: Console | None = None, live: bool | None = None) -> str:
    """Validate, run (or resume) and summarise; returns the run's final status."""
    console = console or Console(stderr=True)
    host = app.host()
    strategy_cls = host.get("strategies", core["strategy"])
    config = build_config(core, strategy_values, evaluator_values, strategy_cls)
    tasks = app.catalog.select(config.suite, config.tasks)
    spec = host.get("evaluators", config.evaluator)
    llm = build_llm_client(config, host)
    run_name = core.get("run_name") or config.default_run_name()
    store = RunStore(Path(core.get("output_dir") or "runs") / run_name)
    extra = dict(config.evaluator_options)
    workdir = extra.pop("workdir", None)
    own = set(spec.option_names())
    options = EvaluatorOptions(device=config.device, protocol=config.protocol,
                               protocol_params=dict(config.protocol_params), timeout_s=config.timeout_s,
                               workdir=Path(workdir) if workdir else None,
                               extra={k: v for k, v in extra.items() if k in own})
    strategy = strategy_cls(strategy_cls.Config(**config.strategy_options))
    title = f"{run_name}: {strategy_cls.name} on {config.suite} with {llm.label()}"
    progress = RunProgress(title, [t.ref for t in tasks], config.query_budget, live=live, console=console)
    console.print(f"run directory: {store.path}" + (" (resuming)" if store.exists else ""))
    fix_label = f"; fixes by {llm.label('fix')}" if config.fix_llm else ""
    console.print(f"{strategy_cls.name} on {len(tasks)} task(s) of {config.suite} with {llm.label()}{fix_label}")
    runner = Runner(config, store=store, tasks=tasks, strategy=strategy, llm=llm,
                    evaluator_factory=lambda: spec.build(options), progress=progress, name=run_name)
    status = runner.run()
    print_summary(runner, console)
    if status == "interrupted":
        console.print(f"[yellow]interrupted[/yellow]: rerun the same command to resume {store.path}")
    elif status == "failed":
        console.print(f"[red]some tasks failed[/red]: see {store.path / 'log.txt'}")
    return status


def print_summary(runner: Runner, console: Console) -> None:
    table = Table(title=f"{runner.name}: results")
    for column in ("task", "baseline ms", "best ms", "speedup", "queries", "spend", "correct/attempts"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for ref, task_run in runner.task_runs.items():
        counts = runner.progress.tasks[ref].counts
        attempts = sum(counts.values())
        speedup = task_run.best_speedup
        table.add_row(
            ref,
            f"{task_run.baseline_ms:.4f}" if task_run.baseline_ms else "-",
            f"{task_run.best_runtime_ms:.4f}" if task_run.best_runtime_ms else "-",
            f"{speedup:.2f}x" if speedup else "-",
            f"{task_run.queries_used}/{runner.config.query_budget}",
            f"${task_run.spent_usd:.2f}" if task_run.spend_known else "unknown",
            f"{counts.get('correct', 0)}/{attempts}",
        )
    console.print(table)
