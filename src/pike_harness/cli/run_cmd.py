"""``pikeh run``: a durable, resumable search run of one strategy over a suite.

The command's options grow with the chosen strategy: ``pikeh run --strategy pike-b --help`` lists
PIKE-B's own options (each field of its Config), and the chosen evaluator's options are added too.
Options come from the command line, then ``--config run.toml``, then defaults.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from pike_harness.cli import App, get_app
from pike_harness.cli.evaluator_options import evaluator_options, pop_evaluator_values
from pike_harness.errors import UserError
from pike_harness.run_config import EXIT_LLM_ERRORS, LLM_FAILURE_LIMIT, default

DEFAULT_OUTPUT_DIR = Path("runs")


def _peek(args: list[str], name: str) -> str | None:
    """The value of ``--name VALUE`` / ``--name=VALUE`` in raw arguments, before click parses them."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


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


def config_options(config_cls: type, *, marker: str) -> list[click.Option]:
    """One click option per field of a plugin's Config dataclass (pike_harness.configurable).

    The one Config mechanism strategies, evaluators and reporters share: each option carries the
    attribute ``marker`` (True), so a command can tell the plugin's options from its own.
    """
    options = []
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        kind = hints.get(f.name, str)
        base, multiple = _base_type(kind)
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        meta = f.metadata
        flag = "--" + f.name.replace("_", "-")
        common: dict[str, Any] = {"default": default, "show_default": True, "help": meta.get("help", "")}
        if meta.get("metavar"):
            common["metavar"] = meta["metavar"]
        if base is bool:
            option = click.Option([f"{flag}/--no-{f.name.replace('_', '-')}", f.name], **common)
        else:
            click_type: Any = base
            if base in (int, float) and ("min" in meta or "max" in meta):
                ranged = click.IntRange if base is int else click.FloatRange
                click_type = ranged(min=meta.get("min"), max=meta.get("max"))
            option = click.Option([flag, f.name], type=click_type, multiple=multiple, **common)
        setattr(option, marker, True)
        options.append(option)
    return options


def strategy_options(strategy_cls: type) -> list[click.Option]:
    """One click option per field of the strategy's Config dataclass."""
    return config_options(strategy_cls.Config, marker="pikeh_strategy_option")


def _base_type(kind: Any) -> tuple[type, bool]:
    """(the click type of a Config field, whether the option repeats)."""
    if typing.get_origin(kind) in (tuple, list):
        args = [a for a in typing.get_args(kind) if a is not Ellipsis]
        return (_base_type(args[0])[0] if args else str), True
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = args[0] if args else str
    return (kind if kind in (bool, int, float, str) else str), False


class RunCommand(click.Command):
    """Adds the chosen strategy's and evaluators' options before parsing, so --help shows them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        self._add_dynamic_options(args)
        return super().parse_args(ctx, args)

    def _add_dynamic_options(self, args: list[str]) -> None:
        host = App.host()
        # The command object outlives one invocation (several runs in one process, as in tests): drop
        # the options an earlier parse added for its strategy before adding this one's.
        self.params = [p for p in self.params if not getattr(p, "pikeh_strategy_option", False)]
        existing = {name for p in self.params for name in p.opts}
        name = _peek(args, "--strategy") or _config_strategy_name(_peek(args, "--config"))
        if name and name in host.names("strategies"):
            for option in strategy_options(host.get("strategies", name)):
                clash = [o for o in option.opts if o in existing]
                if clash:
                    raise UserError(f"strategy {name!r} defines option {clash[0]}, which `pikeh run` already has; "
                                    "its author must rename the Config field")
                self.params.append(option)


RUN_OPTIONS = [
    click.Option(["--strategy"], help="Search strategy (see `pikeh plugins`), e.g. pike-b, pike-o, best-of-n."),
    click.Option(["--suite"], help="Task suite, e.g. level3-pike or smoke."),
    click.Option(["--tasks"], help="Task ids within the suite: 1-5,9,12 (default: all)."),
    click.Option(["--llm"], help="PROVIDER:MODEL, e.g. google:gemini-2.5-pro, openai:gpt-5, offline:mutate."),
    click.Option(["--llm-base-url"], help="Override the provider's endpoint (proxy, gateway, local server)."),
    click.Option(["--fix-llm"], help="PROVIDER:MODEL for the error-fixing agent (PIKE's cheap EFA)."),
    click.Option(["--query-budget"], type=click.IntRange(min=1), default=default("query_budget"), show_default=True,
                 help="LLM queries per task (brainstorming is not counted)."),
    click.Option(["--money-budget"], type=click.FloatRange(min=0), help="Stop a task once its spend reaches USD."),
    click.Option(["--run-name"], help="Name of the run directory (default: derived from the options, so "
                                      "re-running the same command resumes)."),
    click.Option(["--output-dir"], type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_OUTPUT_DIR,
                 show_default=True,
                 help="Where run directories live."),
    click.Option(["--seed"], type=int, default=default("seed"), show_default=True,
                 help="Seed for the strategy's random choices."),
    click.Option(["--temperature"], type=click.FloatRange(min=0), default=default("temperature"), show_default=True,
                 help="Sampling temperature (PIKE: 0.8)."),
    click.Option(["--max-tokens"], type=click.IntRange(min=1), default=default("max_tokens"), show_default=True,
                 help="Output token limit per query (PIKE: 32,000)."),
    click.Option(["--reasoning-effort"], type=click.Choice(["low", "medium", "high"]),
                 help="For reasoning models (sent instead of temperature where the API requires it)."),
    click.Option(["--precision-rule"], type=click.Choice(["tolerance", "stated"]),
                 help="tolerance (PIKE's rule): prompts say nothing about precision, the tolerance alone "
                      "judges; stated: prompts forbid computing below the task's precision (fp32 for "
                      "level3-pike). Default: each suite's own precision_rule."),
    click.Option(["--llm-concurrency"], type=click.IntRange(min=1), default=default("llm_concurrency"), show_default=True,
                 help="Concurrent LLM requests for the whole run."),
    click.Option(["--llm-cache"], type=click.Path(), help="Opt-in response cache folder (identical requests "
                                                           "get the stored reply)."),
    click.Option(["--replay-dir"], type=click.Path(path_type=Path),
                 help="For --llm offline:replay: the recorded run to answer from."),
    click.Option(["--config"], type=click.Path(dir_okay=False), help="A run.toml with any of these options; "
                 "[strategy] holds the strategy's options (and may name it). Command-line values win."),
    click.Option(["--retry-llm-errors"], is_flag=True, default=False,
                 help="On resume, ask the queries that ended as llm_error again (their attempts are redone)."),
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
        if getattr(param, "pikeh_strategy_option", False):
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

    try:
        status = launch_run(get_app(), merged, strategy_values, evaluator_values)
    except UserError as exc:
        if _run_threads_left():
            # The run stopped on an error while queries were still waiting (in a retry's back-off, say):
            # the journal is closed, so do not wait for them at interpreter exit.
            click.echo(f"Error: {exc.format_message()}", err=True)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.exit_code)
        raise
    exit_for(status)


def _run_threads_left() -> bool:
    import threading

    return any(t.name.startswith(("pikeh-attempt", "pikeh-task")) and t.is_alive() for t in threading.enumerate())


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
