"""Shared by every command that builds an evaluator (`pikeh eval`, `pikeh run`): the common options,
each registered evaluator's own options, and turning parsed values into an Evaluator.

Evaluator plugins declare click options on their ``EvaluatorSpec``; this module adds all of them to
a command (first registration of an option name wins, clashes are skipped) and hands each evaluator
the values of its own options in ``EvaluatorOptions.extra``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pike_harness.cli import App
from pike_harness.evaluation import Evaluator, EvaluatorOptions, EvaluatorSpec

DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+(,\d+)*)?)$")
COMMON = ("evaluator", "device", "protocol", "timeout", "workdir")


def _protocol_names() -> list[str]:
    from pike_harness.worker.protocols import PROTOCOLS

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


def evaluator_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: the common evaluator options, then every registered evaluator's own options."""
    decorators = [
        click.option("--evaluator", default="local", show_default=True, metavar="NAME",
                     help="Which evaluator plugin runs the evaluation (see `pikeh plugins`)."),
        click.option("--device", default="auto", show_default=True, callback=_check_device,
                     help="auto (GPUs if any, else CPU), cpu (host-clock timing, same checks), cuda, "
                          "cuda:N or cuda:0,1."),
        click.option("--protocol", default="robust", show_default=True, type=click.Choice(_protocol_names()),
                     help="Timing protocol: robust (median with spread, default), pike (do_bench "
                          "semantics as in the paper: mean over 5 s), quick (5 calls, for smoke checks)."),
        click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
                     help="Wall-clock limit per stage (load/compile, correctness, timing); the whole "
                          "process group is killed past it. Default: 900 s to load, 600 s otherwise."),
        click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     callback=_make_workdir,
                     help="Where the evaluator keeps scratch and reference files (default: a temporary folder)."),
    ]
    seen = {"--" + name for name in COMMON}
    for spec in App.host().values("evaluators"):
        for option in getattr(spec, "options", []):
            if any(opt in seen for opt in option.opts):
                continue
            seen.update(option.opts)
            decorators.append(_attach(option))
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def _attach(option: click.Option) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
        if not hasattr(function, "__click_params__"):
            function.__click_params__ = []  # type: ignore[attr-defined]
        function.__click_params__.append(option)  # type: ignore[attr-defined]
        return function

    return decorator


def pop_evaluator_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Remove the common options and every plugin option from ``kwargs``; return them by name."""
    values = {name: kwargs.pop(name) for name in COMMON if name in kwargs}
    plugin_names = {opt.name for spec in App.host().values("evaluators") for opt in getattr(spec, "options", [])}
    values["extra"] = {name: kwargs.pop(name) for name in list(kwargs) if name in plugin_names}
    return values


def build_evaluator(values: dict[str, Any]) -> Evaluator:
    """The named evaluator built from parsed option values; user mistakes become one-line errors."""
    spec: EvaluatorSpec = App.host().get("evaluators", values.get("evaluator") or "local")
    own = {opt.name for opt in getattr(spec, "options", [])}
    options = EvaluatorOptions(
        device=values.get("device") or "auto",
        protocol=values.get("protocol") or "robust",
        timeout_s=values.get("timeout"),
        workdir=values.get("workdir"),
        extra={name: value for name, value in values.get("extra", {}).items() if name in own},
    )
    return spec.build(options)
