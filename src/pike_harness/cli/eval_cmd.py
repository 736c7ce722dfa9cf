"""``pikeh eval CANDIDATE.py --task SUITE/ID``: check and time one candidate file, print the verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from pike_harness.cli import get_app
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    build_evaluator,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.contracts.evaluation import EvaluatorError
from pike_harness.contracts.model import EvalResult
from pike_harness.errors import UserError


@click.command("eval", cls=EvaluatorCommand)
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--task", "task_ref", required=True, metavar="SUITE/ID", help="The task, e.g. smoke/1.")
@click.option("--json", "as_json", is_flag=True, help="Print the result record as one JSON object.")
@evaluator_options
def eval_command(candidate: Path, task_ref: str, as_json: bool, **kwargs: Any) -> None:
    """Evaluate one candidate file against a task: load it in a sandboxed process, check it on public
    and hidden input sets against the reference, time it, and print the verdict.

    The verdict is one of compile_error, runtime_error, timeout, incorrect, rejected (a cheat was
    detected; the result names the check) or correct (with a runtime). The exit status is 0 whenever
    an evaluation happened, whatever the verdict.
    """
    values = pop_evaluator_values(kwargs)
    task = get_app().catalog.resolve(task_ref)
    try:
        source = candidate.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{candidate}: cannot read the candidate: {exc}") from None
    from rich.console import Console

    # A spinner on stderr (a terminal only: nothing in a pipe or with --json output captured) says which
    # stage the command is in; the first evaluation on a machine can take a minute.
    status = Console(stderr=True).status(f"starting the {values.get('evaluator') or 'local'} evaluator",
                                         spinner="dots")
    with status, build_evaluator(values) as evaluator:
        status.update(f"evaluating {candidate.name} on {task.ref}: load, check against the reference, time "
                      f"(protocol {values.get('protocol') or 'robust'}, device {values.get('device') or 'auto'})")
        try:
            result = evaluator.evaluate(task.eval_request(source))
        except EvaluatorError as exc:
            raise UserError(f"the evaluation could not run: {exc}") from None
        status.update("closing the evaluator")
    if as_json:
        click.echo(json.dumps(result.to_dict(), sort_keys=True))
    else:
        _print(result, candidate)


def _print(result: EvalResult, candidate: Path) -> None:
    from rich.console import Console

    console = Console()
    colour = {"correct": "green", "incorrect": "red", "rejected": "magenta"}.get(result.category, "yellow")
    console.print(f"[bold]{candidate.name}[/bold] on {result.task}: [bold {colour}]{result.category}[/]")
    if result.reason:
        console.print(f"reason ({result.check}): {result.reason}")
    if result.runtime is not None:
        r = result.runtime
        console.print(f"runtime {r.headline_ms:.4f} ms ({r.statistic} of {r.n}; median {r.median_ms:.4f}, "
                      f"mean {r.mean_ms:.4f}, min {r.min_ms:.4f}, stdev {r.stdev_ms:.4f}, cv {r.cv:.3f}, "
                      f"iqr {r.iqr_ms:.4f})")
    worst = max((o for o in result.outputs if o.max_abs_diff is not None), key=lambda o: o.max_abs_diff or 0.0,
                default=None)
    if worst is not None:
        console.print(f"outputs: {len(result.outputs)} checked; largest diff abs {worst.max_abs_diff:.3g}, "
                      f"rel {worst.max_rel_diff:.3g} (input set {worst.input_set})")
    if result.flags:
        console.print(f"flags: {', '.join(result.flags)}")
    protocol = result.protocol
    device = result.environment.get("gpu") or result.environment.get("cpu")
    console.print(f"protocol {protocol.get('name')} v{protocol.get('version')} on {result.environment.get('device')} "
                  f"({device}); stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.stage_seconds.items()))
    if not result.is_correct and result.stderr_tail.strip():
        console.print("[dim]stderr (last lines):[/dim]")
        console.print("\n".join(result.stderr_tail.strip().splitlines()[-15:]), markup=False, highlight=False)
