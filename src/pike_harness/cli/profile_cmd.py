"""``pikeh profile CANDIDATE.py --task SUITE/ID``: where a candidate's time goes, kernel by kernel.

The candidate is evaluated exactly as ``pikeh eval`` does (same sandbox, checks and timing) with
``EvalRequest.profile`` set, so after a correct timing its process runs a few more calls under
``torch.profiler`` (worker/inside/profiling.py). One evaluation path: a profile is of what was judged.
"""

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
from pike_harness.errors import UserError
from pike_harness.host import terminal


@click.command("profile", cls=EvaluatorCommand)
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--task", "task_ref", required=True, metavar="SUITE/ID", help="The task, e.g. smoke/1.")
@click.option("--reference", is_flag=True, help="Profile the task's reference instead (CANDIDATE is then ignored; "
                                                 "pass any file, e.g. the task's own).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile summary as one JSON object.")
@evaluator_options
def profile_command(candidate: Path, task_ref: str, reference: bool, as_json: bool, **kwargs: Any) -> None:
    """Check and time one candidate like `pikeh eval`, then profile a few calls under torch.profiler:
    kernels (operators on a CPU) by total time with launches per call, the share of time in custom
    (load_inline/Triton) kernels against PyTorch's and cuBLAS/cuDNN's, and host-side gaps.

    \b
    Example:
      pikeh profile best.py --task level3-pike/9 --device cuda
    """
    values = pop_evaluator_values(kwargs)
    task = get_app().catalog.resolve(task_ref)
    try:
        source = task.source if reference else candidate.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{candidate}: cannot read the candidate: {exc}") from None
    with build_evaluator(values) as evaluator:
        try:
            result = evaluator.evaluate(task.eval_request(source, profile=True))
        except EvaluatorError as exc:
            raise UserError(f"the evaluation could not run: {exc}") from None
    if not result.is_correct:
        raise UserError(f"{candidate.name} on {task.ref}: {result.category} ({result.check}: {result.reason}); only a "
                        "correct candidate is profiled")
    summary = result.profile or {}
    if as_json:
        click.echo(json.dumps({"task": task.ref, "runtime_ms": result.runtime_ms, "profile": summary,
                               "environment": result.environment}, sort_keys=True, default=str))
        return
    if summary.get("error") or not summary:
        raise UserError(f"the profile failed: {summary.get('error') or 'no profile came back'}")
    print_profile(summary, f"{candidate.name if not reference else 'reference'} on {task.ref}", result.runtime_ms)


def print_profile(summary: dict[str, Any], title: str, runtime_ms: float | None) -> None:
    from rich.table import Table

    console = terminal.console()
    # The summary is made in the candidate's process: every string of it is shown, never read as markup.
    unit = str(summary.get("unit", "kernel"))
    table = Table(title=terminal.literal(f"{title}: {unit}s by total time ({summary.get('calls')} profiled calls)"),
                  title_justify="left")
    for column in (terminal.literal(unit), "origin", "ms/call", "per call", "share"):
        table.add_column(column, justify="left" if column in (unit, "origin") else "right")
    for k in summary.get("kernels") or []:
        table.add_row(terminal.literal(k["name"][:90]), terminal.literal(k["origin"]), f"{k['ms_per_call']:.4f}",
                      f"{k['per_call']:g}",
                      f"{(k.get('share') or 0) * 100:.1f}%")
    console.print(table)
    share = ", ".join(f"{origin} {value * 100:.1f}%" for origin, value in (summary.get("share") or {}).items())
    console.print(f"time by origin: {share or '-'}", markup=False, highlight=False)
    timed = f"; timed runtime {runtime_ms:.4f} ms" if runtime_ms is not None else ""
    console.print(f"per call: wall {summary['wall_ms_per_call']:.4f} ms under the profiler, {unit}s busy "
                  f"{summary['busy_ms_per_call']:.4f} ms, host-side gaps {summary['gap_ms_per_call']:.4f} ms, "
                  f"{summary['launches_per_call']:g} {unit} launches{timed}", markup=False, highlight=False)
