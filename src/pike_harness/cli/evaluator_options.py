"""Shared by every command that builds an evaluator (`pikeh eval`, `run`, `baselines`, `report`): the
common options, the chosen evaluator's own options, and turning parsed values into an Evaluator.

Evaluator plugins declare their options as a ``Config`` dataclass on their ``EvaluatorSpec``. A
command built with ``cls=EvaluatorCommand`` (and ``@evaluator_options``) attaches the options of the
evaluator named by ``--evaluator`` (default ``local``) before it parses, so
``pikeh eval --evaluator ray --help`` lists Ray's options and not local's; the values reach the
evaluator as its Config (``EvaluatorOptions.config``), never as an untyped dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pike_harness.cli import App
from pike_harness.cli.config_options import attach_options, dataclass_options, finite_float
from pike_harness.contracts.evaluation import Evaluator, EvaluatorOptions, EvaluatorSpec

DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+(,\d+)*)?)$")
COMMON = ("evaluator", "device", "protocol", "timeout", "workdir")
EVALUATOR_TAG = "pikeh_evaluator_option"  # marks the options attached for the chosen evaluator


def _protocol_names() -> list[str]:
    from pike_harness.worker.inside.protocols import PROTOCOLS

    return sorted(PROTOCOLS)


def _check_device(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if not DEVICE.match(value.strip().lower()):
        raise click.BadParameter(f"{value!r}: write auto, cpu, cuda, cuda:N or cuda:0,1")
    return value.strip().lower()


def _make_workdir(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    """Create --workdir now, so a folder that cannot exist is this option's error, not the evaluator's."""
    if value is not None:
        try:
            value.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.BadParameter(f"{value} cannot be created: {exc.strerror}") from None
    return value


def _peek(args: list[str], name: str) -> str | None:
    """The value of ``--name VALUE`` / ``--name=VALUE`` in raw arguments, before click parses them."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def spec_options(spec: EvaluatorSpec) -> list[click.Option]:
    """The CLI options of one evaluator: a field of its Config each."""
    if spec.config is None:
        return []
    return dataclass_options(spec.config, tag=EVALUATOR_TAG, show_default=False)


class EvaluatorCommand(click.Command):
    """A command that builds an evaluator: adds the chosen evaluator's options before parsing, so they
    parse and show in ``--help``."""

    def evaluator_name(self, args: list[str]) -> str:
        return _peek(args, "--evaluator") or "local"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        self._add_dynamic_options(args)
        return super().parse_args(ctx, args)

    def _add_dynamic_options(self, args: list[str]) -> None:
        name = self.evaluator_name(args)
        host = App.host()
        # An unknown name attaches nothing: build_evaluator says it is unknown.
        options = spec_options(host.get("evaluators", name)) if name in host.names("evaluators") else []
        attach_options(self, options, tag=EVALUATOR_TAG, owner=f"evaluator {name!r}")


def evaluator_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: the common evaluator options. The chosen evaluator's own come from the command's
    class, ``EvaluatorCommand``, when it parses."""
    decorators = [
        click.option("--evaluator", default="local", show_default=True, metavar="NAME",
                     help="Which evaluator plugin runs the evaluation (see `pikeh plugins`); its own options "
                          "are listed by `--evaluator NAME --help`."),
        click.option("--device", default="auto", show_default=True, callback=_check_device,
                     help="auto (GPUs if any, else CPU), cpu (host-clock timing, same checks), cuda, "
                          "cuda:N or cuda:0,1."),
        click.option("--protocol", default="robust", show_default=True, type=click.Choice(_protocol_names()),
                     help="Timing protocol: robust (median with spread, default), pike (do_bench "
                          "semantics as in the paper: mean over 5 s), quick (5 calls, for smoke checks)."),
        click.option("--timeout", type=finite_float(min=0, min_open=True), default=None, metavar="SECONDS",
                     help="Wall-clock limit per stage (load/compile, correctness, timing); the whole "
                          "process group is killed past it. Default: 900 s to load, 600 s otherwise."),
        click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     callback=_make_workdir,
                     help="Where the evaluator keeps scratch and reference files (default: a temporary folder)."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


OWN = "own"  # the key of the chosen evaluator's own option values in ``pop_evaluator_values``'s result


def pop_evaluator_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Remove the common options and the chosen evaluator's options from ``kwargs``; return them by
    name, the evaluator's own under ``OWN`` (a run records them so; ``build_evaluator`` types them)."""
    values = {name: kwargs.pop(name) for name in COMMON if name in kwargs}
    host = App.host()
    name = values.get("evaluator") or "local"
    own = host.get("evaluators", name).option_names() if name in host.names("evaluators") else []
    values[OWN] = {option: kwargs.pop(option) for option in own if option in kwargs}
    return values


def build_evaluator(values: dict[str, Any]) -> Evaluator:
    """The named evaluator built from parsed option values; user mistakes become one-line errors."""
    spec: EvaluatorSpec = App.host().get("evaluators", values.get("evaluator") or "local")
    options = EvaluatorOptions(
        device=values.get("device") or "auto",
        protocol=values.get("protocol") or "robust",
        timeout_s=values.get("timeout"),
        workdir=values.get("workdir"),
        config=spec.make_config(values.get(OWN, {})),
    )
    return spec.build(options)
