"""``pikeh run``: a durable, resumable search run of one strategy over a suite.

The command's options grow with the chosen strategy: ``pikeh run --strategy pike-b --help`` lists
PIKE-B's own options (each field of its Config), and the chosen evaluator's options are added too.
Options come from the command line, then ``--config run.toml``, then defaults.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from pike_harness.cli import App, get_app
from pike_harness.cli.config_options import attach_options, dataclass_options
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    _peek,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.errors import UserError

DEFAULT_OUTPUT_DIR = Path("runs")
STRATEGY_TAG = "pikeh_strategy_option"  # marks the options attached for the chosen strategy


def _read_config_file(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"config file {path} cannot be read: {exc}") from None
    return {k.replace("-", "_"): v for k, v in data.items()}


def strategy_options(strategy_cls: type) -> list[click.Option]:
    """One click option per field of the strategy's Config dataclass."""
    return dataclass_options(strategy_cls.Config, tag=STRATEGY_TAG)


class RunCommand(EvaluatorCommand):
    """Adds the chosen strategy's and evaluator's options before parsing, so --help shows them."""

    def evaluator_name(self, args: list[str]) -> str:
        return _peek(args, "--evaluator") or _read_config_file(_peek(args, "--config")).get("evaluator") or "local"

    def _add_dynamic_options(self, args: list[str]) -> None:
        super()._add_dynamic_options(args)
        host = App.host()
        name = _peek(args, "--strategy") or _read_config_file(_peek(args, "--config")).get("strategy")
        known = bool(name) and name in host.names("strategies")
        attach_options(self, strategy_options(host.get("strategies", name)) if known else [],
                       tag=STRATEGY_TAG, owner=f"strategy {name!r}")


RUN_OPTIONS = [
    click.Option(["--strategy"], help="Search strategy (see `pikeh plugins`), e.g. pike-b, pike-o, best-of-n."),
    click.Option(["--suite"], help="Task suite, e.g. level3-pike or smoke."),
    click.Option(["--tasks"], help="Task ids within the suite: 1-5,9,12 (default: all)."),
    click.Option(["--llm"], help="PROVIDER:MODEL, e.g. google:gemini-2.5-pro, openai:gpt-5, offline:mutate."),
    click.Option(["--llm-base-url"], help="Override the provider's endpoint (proxy, gateway, local server)."),
    click.Option(["--fix-llm"], help="PROVIDER:MODEL for the error-fixing agent (PIKE's cheap EFA)."),
    click.Option(["--query-budget"], type=click.IntRange(min=1), default=300, show_default=True,
                 help="LLM queries per task (brainstorming is not counted)."),
    click.Option(["--money-budget"], type=click.FloatRange(min=0), help="Stop a task once its spend reaches USD."),
    click.Option(["--run-name"], help="Name of the run directory (default: derived from the options, so "
                                      "re-running the same command resumes)."),
    click.Option(["--output-dir"], type=click.Path(path_type=Path), default=DEFAULT_OUTPUT_DIR, show_default=True,
                 help="Where run directories live."),
    click.Option(["--seed"], type=int, default=0, show_default=True, help="Seed for the strategy's random choices."),
    click.Option(["--temperature"], type=float, default=0.8, show_default=True, help="Sampling temperature (PIKE: 0.8)."),
    click.Option(["--max-tokens"], type=click.IntRange(min=1), default=32_000, show_default=True,
                 help="Output token limit per query (PIKE: 32,000)."),
    click.Option(["--reasoning-effort"], type=click.Choice(["low", "medium", "high"]),
                 help="For reasoning models (sent instead of temperature where the API requires it)."),
    click.Option(["--llm-concurrency"], type=click.IntRange(min=1), default=10, show_default=True,
                 help="Concurrent LLM requests for the whole run."),
    click.Option(["--llm-cache"], type=click.Path(), help="Opt-in response cache folder (identical requests "
                                                           "get the stored reply)."),
    click.Option(["--replay-dir"], type=click.Path(path_type=Path),
                 help="For --llm offline:replay: the recorded run to answer from."),
    click.Option(["--config"], type=click.Path(), help="A run.toml with any of these options; [strategy] holds "
                                                       "strategy options. Command-line values win."),
]

def merged_options(ctx: click.Context, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(all options, strategy options): command line over config file over defaults."""
    file_values = _read_config_file(values.get("config"))
    file_strategy: dict[str, Any] = {}
    if isinstance(file_values.get("strategy"), dict):  # a [strategy] table holds the strategy's options
        file_strategy = {k.replace("-", "_"): v for k, v in file_values.pop("strategy").items()}
        if "name" in file_strategy:
            file_values["strategy"] = file_strategy.pop("name")
    known = {p.name for p in ctx.command.params}
    unknown = set(file_values) - known
    if unknown:
        raise UserError(f"config file {values['config']}: unknown option(s) {', '.join(sorted(unknown))}")

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
    from pike_harness.launch import launch_run

    status = launch_run(get_app(), merged, strategy_values, evaluator_values)
    if status == "interrupted":
        # Threads still waiting on an LLM past the grace period are abandoned: the journal already holds
        # every answer that arrived, and a resume re-asks only what never did.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    if status != "complete":
        sys.exit(1)
