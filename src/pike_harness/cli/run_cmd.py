"""``pikeh run``: a durable, resumable search run of one strategy over a suite.

The command's options grow with the chosen strategy: ``pikeh run --strategy pike-b --help`` lists
PIKE-B's own options (each field of its Config), and the chosen evaluator's options are added too.
Options come from the command line, then ``--config run.toml``, then defaults.
"""

from __future__ import annotations

import math
import os
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from pike_harness.cli import App, get_app
from pike_harness.cli.config_options import attach_options, dataclass_options, finite_float
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    _peek,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.errors import UsageError, UserError
from pike_harness.host.output_paths import check_output_dir
from pike_harness.host.run_config import EXIT_LLM_ERRORS, LLM_FAILURE_LIMIT, default

if TYPE_CHECKING:
    from pike_harness.contracts.strategy import Strategy

DEFAULT_OUTPUT_DIR = Path("runs")
STRATEGY_TAG = "pikeh_strategy_option"  # marks the options attached for the chosen strategy


def _read_config_file(path: str | None) -> dict[str, Any]:
    """The file's options with ``-`` spelled ``_``; a ``[strategy]`` table stays a dict (see split_strategy)."""
    if not path:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"config file {path} cannot be read: {exc}") from None
    return {k.replace("-", "_"): v for k, v in data.items()}


def split_strategy(file_values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run options, strategy options): a ``[strategy]`` table holds the strategy's options and may
    name it (``name = "pike-b"``), as ``strategy = "pike-b"`` at the top level does."""
    values = dict(file_values)
    table = values.get("strategy")
    if not isinstance(table, dict):
        return values, {}
    strategy = {k.replace("-", "_"): v for k, v in table.items()}
    name = strategy.pop("name", None)
    if name is None:
        values.pop("strategy")
    else:
        values["strategy"] = name
    return values, strategy


def _config_strategy_name(path: str | None) -> str | None:
    name = split_strategy(_read_config_file(path))[0].get("strategy")
    return name if isinstance(name, str) else None


def _check_file_value(ctx: click.Context, param: click.Parameter, value: Any, where: str) -> Any:
    """A config-file value goes through the option's own type, bounds and checks, as on the command line."""
    if isinstance(value, bool) and not (isinstance(param, click.Option) and param.is_flag):
        raise UserError(f"{where}: {value!r} is not a valid value for {param.name}")
    if isinstance(param.type, click.types.IntParamType) and isinstance(value, float):
        raise UserError(f"{where}: {value!r} is not an integer")
    if isinstance(value, (dict, list)):
        raise UserError(f"{where}: expected one value, got {type(value).__name__}")
    try:
        return param.process_value(ctx, value)
    except click.BadParameter as exc:
        raise UserError(f"{where}: {exc.message}") from None


def strategy_options(strategy_cls: type[Strategy]) -> list[click.Option]:
    """One click option per field of the strategy's Config dataclass."""
    return dataclass_options(strategy_cls.Config, tag=STRATEGY_TAG)


class RunCommand(EvaluatorCommand):
    """Adds the chosen strategy's and evaluator's options before parsing, so --help shows them."""

    def evaluator_name(self, args: list[str]) -> str:
        return _peek(args, "--evaluator") or _read_config_file(_peek(args, "--config")).get("evaluator") or "local"

    def _add_dynamic_options(self, args: list[str]) -> None:
        super()._add_dynamic_options(args)
        host = App.host()
        name = _peek(args, "--strategy") or _config_strategy_name(_peek(args, "--config"))
        known = name is not None and name in host.names("strategies")
        attach_options(self, strategy_options(host.get("strategies", name)) if name is not None and known else [],
                       tag=STRATEGY_TAG, owner=f"strategy {name!r}")


RUN_OPTIONS = [
    click.Option(["--strategy"], help="Search strategy (see `pikeh plugins`), e.g. pike-b, pike-o, best-of-n."),
    click.Option(["--suite"], help="Task suite, e.g. level3-pike or smoke."),
    click.Option(["--tasks"], help="Task ids within the suite: 1-5,9,12 (default: all)."),
    click.Option(["--llm"], help="PROVIDER:MODEL, e.g. google:gemini-2.5-pro, openai:gpt-5, offline:mutate."),
    click.Option(["--llm-base-url"], help="Override the provider's endpoint (proxy, gateway, local server)."),
    click.Option(["--fix-llm"], help="PROVIDER:MODEL for the error-fixing agent (PIKE's cheap EFA)."),
    click.Option(["--query-budget"], type=click.IntRange(min=1), default=default("query_budget"), show_default=True,
                 help="LLM queries per task (brainstorming is not counted)."),
    click.Option(["--money-budget"], type=finite_float(min=0), help="Stop a task once its spend reaches USD."),
    click.Option(["--run-name"], help="Name of the run directory (default: derived from the options, so "
                                      "re-running the same command resumes)."),
    click.Option(["--output-dir"], type=click.Path(path_type=Path), default=DEFAULT_OUTPUT_DIR,
                 show_default=True,
                 help="Where run directories live."),
    click.Option(["--seed"], type=int, default=default("seed"), show_default=True,
                 help="Seed for the strategy's random choices and the LLM's per-query seeds."),
    click.Option(["--seeds"], metavar="LIST",
                 help="Run the configuration once per seed (0,1,2 or 0-4), one run directory each, in a seed "
                      "group folder (docs/run-layout.md); the report gives confidence intervals over them."),
    click.Option(["--repeats"], type=click.IntRange(min=1),
                 help="As --seeds with N seeds counting up from --seed."),
    click.Option(["--temperature"], type=finite_float(min=0), default=default("temperature"), show_default=True,
                 help="Sampling temperature (PIKE: 0.8)."),
    click.Option(["--max-tokens"], type=click.IntRange(min=1), default=default("max_tokens"), show_default=True,
                 help="Output token limit per query (PIKE: 32,000)."),
    click.Option(["--reasoning-effort"], type=click.Choice(["low", "medium", "high"]),
                 help="For reasoning models (sent instead of temperature where the API requires it)."),
    click.Option(["--precision-rule"], type=click.Choice(["tolerance", "stated"]),
                 help="tolerance (PIKE's rule): prompts say nothing about precision, the tolerance alone "
                      "judges; stated: prompts forbid computing below the task's precision (fp32 for "
                      "level3-pike). Default: each suite's own precision_rule."),
    click.Option(["--final-retime/--no-final-retime"], default=default("final_retime"), show_default=True,
                 help="When a task's search ends, time its final best paired against the eager reference "
                      "(alternating blocks, 95% interval); the report's headline uses it. --no-final-retime: "
                      "PIKE's search-time number only."),
    click.Option(["--retime-halfwidth"], type=finite_float(min=0.001, max=0.5), default=default("retime_halfwidth"),
                 show_default=True, help="Final re-timing: stop once the speedup's 95% interval is within "
                                         "+- this fraction."),
    click.Option(["--retime-max-seconds"], type=finite_float(min=1), default=default("retime_max_seconds"),
                 show_default=True, help="Final re-timing: at most this many seconds of timed blocks per task "
                                         "(the result then says its interval is wider)."),
    click.Option(["--retime-share"], type=finite_float(min=0.01, max=1.0), default=default("retime_share"),
                 show_default=True, help="Final re-timing: its timed blocks take at most this fraction of the "
                                         "task's search time (never less than 5 s, never more than "
                                         "--retime-max-seconds), so a short run is not mostly re-timing."),
    click.Option(["--include-jit-trace"], is_flag=True, default=default("include_jit_trace"),
                 help="Let attempts whose code contains torch.jit.trace be a task's final best (PIKE's "
                      "analysis ignores them, and so does the default)."),
    click.Option(["--llm-concurrency"], type=click.IntRange(min=1), default=default("llm_concurrency"), show_default=True,
                 help="Concurrent LLM requests for the whole run."),
    click.Option(["--llm-cache"], type=click.Path(), help="Opt-in response cache folder (identical requests "
                                                           "get the stored reply)."),
    click.Option(["--replay-dir"], type=click.Path(path_type=Path),
                 help="For --llm offline:replay: the recorded run to answer from."),
    click.Option(["--config"], type=click.Path(dir_okay=False), help="A run.toml with any of these options; "
                 "[strategy] holds the strategy's options (and may name it). Command-line values win."),
    click.Option(["--retry-llm-errors"], is_flag=True, default=False,
                 help="On resume, ask the queries that ended as llm_error again (their attempts are redone); "
                 "not those whose prompt the provider refused (too long, refused content)."),
    click.Option(["--max-llm-failures"], type=click.IntRange(min=0), default=LLM_FAILURE_LIMIT, show_default=True,
                 help="Stop the run after this many failed queries in a row (0: never)."),
    click.Option(["--repair-journal"], is_flag=True, default=False,
                 help="Move corrupt journal lines to journal.bad.jsonl, then resume."),
]

def merged_options(ctx: click.Context, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(all options, strategy options): command line over config file over defaults.

    A config file is checked exactly like the command line: the same option types and bounds, and a key
    that names no option (of the run, the evaluators, or the chosen strategy) is refused by name.
    """
    path = values.get("config")
    file_values, file_strategy = split_strategy(_read_config_file(path))
    params = {p.name: p for p in ctx.command.params if p.name and p.name != "config"}
    run_params = {n: p for n, p in params.items() if not getattr(p, "pikeh_strategy_option", False)}
    strategy_params = {n: p for n, p in params.items() if getattr(p, "pikeh_strategy_option", False)}
    unknown = sorted(set(file_values) - set(run_params))
    if unknown:
        raise UserError(f"config file {path}: unknown option(s) {', '.join(unknown)}")
    unknown = sorted(set(file_strategy) - set(strategy_params))
    if unknown:
        name = file_values.get("strategy") or values.get("strategy")
        raise UserError(f"config file {path}: [strategy] has unknown option(s) {', '.join(unknown)} "
                        f"(strategy {name!r}; `pikeh run --strategy {name} --help` lists its options)")
    file_values = {k: _check_file_value(ctx, run_params[k], v, f"config file {path}: {k}")
                   for k, v in file_values.items()}
    file_strategy = {k: _check_file_value(ctx, strategy_params[k], v, f"config file {path}: [strategy] {k}")
                     for k, v in file_strategy.items()}

    def pick(name: str, source: dict[str, Any]) -> Any:
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE or name not in source:
            return values.get(name)
        return source[name]

    merged, strategy = {}, {}
    for param in ctx.command.params:
        assert param.name is not None
        if getattr(param, STRATEGY_TAG, False):
            strategy[param.name] = pick(param.name, file_strategy)
        else:
            merged[param.name] = pick(param.name, file_values)
        value = strategy.get(param.name) if getattr(param, STRATEGY_TAG, False) else merged[param.name]
        if isinstance(value, float) and not math.isfinite(value):
            # The options' own types refuse nan and inf (config_options.FiniteFloat); an option built
            # elsewhere with a plain float type (an evaluator's --timeout) is caught here.
            if ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE:
                raise UsageError(f"Invalid value for {param.opts[0]!r}: {value!r} is not a finite number")
            raise UserError(f"config file {path}: {param.name}: {value!r} is not a finite number")
    return merged, strategy


@click.command(cls=RunCommand, params=RUN_OPTIONS, context_settings={"max_content_width": 110})
@evaluator_options
@click.pass_context
def run(ctx: click.Context, **values: Any) -> None:
    """Run a strategy over a suite, durably: Ctrl-C or a crash loses nothing, and the same command resumes.

    \b
    Example:
      pikeh run --strategy pike-b --suite level3-pike --llm google:gemini-2.5-pro
      pikeh run --strategy pike-b --help      # PIKE-B's own options
    """
    merged, strategy_values = merged_options(ctx, values)
    evaluator_values = pop_evaluator_values(merged)
    for required in ("strategy", "suite", "llm"):
        if not merged.get(required):
            raise click.UsageError(f"--{required.replace('_', '-')} is required (or set it in --config)")
    check_output_dir(merged.get("output_dir") or DEFAULT_OUTPUT_DIR, "--output-dir")
    if merged.get("llm_cache"):
        check_output_dir(merged["llm_cache"], "--llm-cache")
    from pike_harness.host.launch import launch_run
    from pike_harness.host.seed_group import chosen_seeds, launch_seeds

    seeds = chosen_seeds(merged.pop("seeds", None), merged.pop("repeats", None), merged.get("seed") or 0)
    before = _run_threads()  # a previous run in this process (a test, a notebook) may still be ending its own
    try:
        if seeds is None:
            status = launch_run(get_app(), merged, strategy_values, evaluator_values)
        else:
            status = launch_seeds(get_app(), merged, strategy_values, evaluator_values, seeds)
    except UserError as exc:
        if _run_threads() - before:
            # The run stopped on an error while queries were still waiting (in a retry's back-off, say):
            # the journal is closed, so do not wait for them at interpreter exit.
            click.echo(f"Error: {exc}", err=True)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        raise
    exit_for(status)


def _run_threads() -> set[Any]:
    """The live threads that run a task or an attempt (a run's own; the names are the run loop's)."""
    import threading

    return {t for t in threading.enumerate() if t.name.startswith(("pikeh-attempt", "pikeh-task")) and t.is_alive()}


def exit_for(status: str) -> None:
    """130 for a stopped run (as for any Ctrl-C), 3 for a run whose queries partly failed, 1 for failures."""
    if status == "interrupted":
        # Threads still waiting on an LLM past the grace period are abandoned: the journal already holds
        # every answer that arrived, and a resume re-asks only what never did.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    if status == "llm_errors":
        sys.exit(EXIT_LLM_ERRORS)
    if status != "complete":
        sys.exit(1)
