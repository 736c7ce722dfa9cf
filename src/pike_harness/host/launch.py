"""Turning `pikeh run` options into a running ``Runner``: validation first, then the run, then a summary.

Everything a user can get wrong (unknown strategy, task, provider or evaluator; a missing API key; a
money budget on an unpriced model; a changed configuration) is caught here, before any query is sent.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from pike_harness.contracts.evaluation import EvaluatorOptions
from pike_harness.contracts.llm import BackendOptions, parse_model_spec
from pike_harness.contracts.model import Task
from pike_harness.errors import UserError
from pike_harness.host import terminal
from pike_harness.host.journal_reading import Replay, read_journal
from pike_harness.host.output_paths import check_output_dir
from pike_harness.host.progress import RunProgress, queries_text
from pike_harness.host.run import Runner
from pike_harness.host.run_config import LLM_FAILURE_LIMIT, RunConfig
from pike_harness.host.store import JOURNAL, RunStore


def with_precision_rule(tasks: list[Task], rule: str | None) -> list[Task]:
    """The tasks under the run's ``--precision-rule`` (each keeps its suite's rule when unset)."""
    if rule is None:
        return tasks
    return [dataclasses.replace(t, meta=dataclasses.replace(t.meta, precision_rule=rule)) for t in tasks]


def build_llm_client(config: RunConfig, host: Any) -> Any:
    from pike_harness.host.llm_client import LLMClient

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


def run_provenance(host: Any, config: RunConfig) -> dict[str, Any]:
    """Which distribution and version provided each plugin this run uses, for run.json's ``plugins``."""
    providers = list(dict.fromkeys(parse_model_spec(spec)[0] for spec in (config.llm, config.fix_llm) if spec))
    return host.provenance(strategy=config.strategy, evaluator=config.evaluator, suite=config.suite,
                           llm_backend=providers)


def check_same_plugins(recorded: dict[str, Any] | None, current: dict[str, Any]) -> None:
    """Refuse to resume a run with a different plugin behind one of its roles (a third-party strategy
    installed since it started, say): its results would mix two plugins while run.json names one."""
    if not recorded:
        return  # a run created before provenance was recorded

    def who(entry: Any) -> Any:
        if isinstance(entry, list):
            return [who(e) for e in entry]
        return (entry["plugin"], entry["distribution"]) if isinstance(entry, dict) else entry

    changed = [role for role in current if role != "third_party" and role in recorded
               and who(recorded[role]) != who(current[role])]
    if changed:
        raise UserError(f"this run was started with other plugins behind its {', '.join(changed)} "
                        "(see `plugins` in its run.json); reinstall them to resume, or choose another --run-name")


def launch_run(app: Any, core: dict[str, Any], strategy_values: dict[str, Any], evaluator_values: dict[str, Any],
               *, console: Console | None = None, live: bool | None = None) -> str:
    """Validate, run (or resume) and summarise; returns the run's final status ("complete",
    "interrupted", "failed", or "llm_errors": complete, but some queries got no answer)."""
    console = console or terminal.console(stderr=True)
    host = app.host()
    strategy_cls = host.get("strategies", core["strategy"])
    config = RunConfig.build(core, strategy_values, evaluator_values, strategy_cls)
    tasks = with_precision_rule(app.catalog.select(config.suite, config.tasks), config.precision_rule)
    spec = host.get("evaluators", config.evaluator)
    llm = build_llm_client(config, host)
    run_name = core.get("run_name") or config.default_run_name()
    output_dir = Path(core.get("output_dir") or "runs")
    check_output_dir(output_dir, "--output-dir")  # the CLI checked it already; library callers too
    store = RunStore(output_dir / run_name)
    own = dict(config.evaluator_options)
    workdir = own.pop("workdir", None)
    options = EvaluatorOptions(device=config.device, protocol=config.protocol,
                               protocol_params=dict(config.protocol_params), timeout_s=config.timeout_s,
                               workdir=Path(workdir) if workdir else None, config=spec.make_config(own))
    strategy = strategy_cls(strategy_cls.Config(**config.strategy_options))
    title = f"{run_name}: {strategy_cls.name} on {config.suite} with {llm.label()}"
    progress = RunProgress(title, [t.ref for t in tasks], config.query_budget, live=live, console=console)
    console.print(f"run directory: {store.path}" + (" (resuming)" if store.exists else ""))
    fix_label = f"; fixes by {llm.label('fix')}" if config.fix_llm else ""
    console.print(f"{strategy_cls.name} on {len(tasks)} task(s) of {config.suite} with {llm.label()}{fix_label}")
    plugins = run_provenance(host, config)
    if store.exists:
        check_same_plugins(store.metadata().get("plugins"), plugins)
    for line in plugins["third_party"]:
        console.print(f"[yellow]third-party plugin[/yellow]: {line}")
    runner = Runner(config, store=store, tasks=tasks, strategy=strategy, llm=llm,
                    evaluator_factory=lambda: spec.build(options), progress=progress, name=run_name,
                    plugins=plugins,
                    repair_journal=bool(core.get("repair_journal")),
                    retry_llm_errors=bool(core.get("retry_llm_errors")),
                    llm_failure_limit=int(LLM_FAILURE_LIMIT if core.get("max_llm_failures") is None
                                          else core["max_llm_failures"]))
    try:
        status = runner.run()
    except UserError:
        if runner.task_runs:  # the run started: show what it did before it stopped
            print_summary(runner)
        raise
    print_summary(runner)
    # The queries still without an answer: those whose prompt the provider refused stay so on every resume.
    unanswered = list(Replay.from_events(read_journal(store.path / JOURNAL)).llm_errors.values())
    refused = sum(bool(e.get("refused")) for e in unanswered)
    failed_queries = len(unanswered) - refused
    if status == "interrupted":
        console.print(f"[yellow]interrupted[/yellow]: rerun the same command to resume {store.path}")
    elif status == "failed":
        console.print(f"[red]some tasks failed[/red]: see {store.path / 'log.txt'}")
    if refused:
        console.print(f"[yellow]{refused} quer{'y' if refused == 1 else 'ies'} failed because the provider refused "
                      "the prompt[/yellow] (too long for the model's context window, or content it will not "
                      "process): journaled as failed and not billed; a resume leaves it so, as asking again "
                      "would get the same refusal")
    if failed_queries:
        console.print(f"[red]{failed_queries} quer{'y' if failed_queries == 1 else 'ies'} ended with an LLM "
                      "error[/red] (no answer after retries); rerun the same command with --retry-llm-errors "
                      "to ask them again")
        if status == "complete":
            status = "llm_errors"
    return status


def print_summary(runner: Runner, console: Console | None = None) -> None:
    """The results table, on stdout (progress goes to stderr), so `pikeh run > out.txt` keeps it."""
    console = console or terminal.console()
    table = Table(title=f"{runner.name}: results", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False,
                  collapse_padding=True)
    # A run that spent nothing (an offline stand-in) has no spend column: $0.00 would read as a price.
    show_spend = any(t.ledger.spent_usd or not t.ledger.spend_known for t in runner.task_runs.values())
    show_final = any(t.final_speedup for t in runner.task_runs.values())
    for column in ("task", "eager ms", "best ms", "speedup", *(["re-timed (95% CI)"] if show_final else []), "queries",
                   *(["spend"] if show_spend else []), "correct"):
        table.add_column(column, justify="left" if column == "task" else "right", no_wrap=True)
    for ref, task_run in runner.task_runs.items():
        counts = runner.progress.tasks[ref].counts
        attempts = sum(counts.values())
        speedup = task_run.best_speedup
        spend = [f"${task_run.ledger.spent_usd:.2f}" if task_run.ledger.spend_known else "unknown"] if show_spend else []
        final = [_final_text(task_run.final_speedup)] if show_final else []
        table.add_row(
            ref,
            f"{task_run.baseline_ms:.4f}" if task_run.baseline_ms else "-",
            f"{task_run.best_runtime_ms:.4f}" if task_run.best_runtime_ms else "-",
            f"{speedup:.2f}x" if speedup else "-",
            *final,
            queries_text(task_run.ledger.queries_used, runner.config.query_budget, short=True),
            *spend,
            f"{counts.get('correct', 0)}/{attempts}",
        )
    console.print(table)
    if show_final:
        console.print("speedup: search-time (the best attempt's own timing over the eager baseline); re-timed: the "
                      "final best timed paired against the eager reference, what `pikeh report` reports")
    if any(t.ledger.queries_used > runner.config.query_budget for t in runner.task_runs.values()):
        console.print("+N: queries past the budget (the strategy's permitted overshoot, e.g. 12/12 +3 past the "
                      "budget); the best is chosen within the budget. correct: correct attempts of all attempts, "
                      "those past the budget included (the report counts only those within it)")


def _final_text(final: tuple[float, float, float] | None) -> str:
    """A paired speedup with its interval, "2.48x (2.45-2.51)"; "-" when the task has none."""
    if final is None:
        return "-"
    speedup, low, high = final
    return f"{speedup:.2f}x ({low:.2f}-{high:.2f})"
