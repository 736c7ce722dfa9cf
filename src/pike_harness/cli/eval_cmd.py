"""``pikeh eval``: check and time one candidate file (``--task``), a folder of them (``--suite``) or a
manifest (``--manifest``), and print the verdicts (many candidates: ``cli.eval_batch``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from pike_harness.cli import get_app
from pike_harness.cli.config_options import finite_float
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    build_evaluator,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.contracts.evaluation import EvaluatorError
from pike_harness.contracts.model import EvalResult, PairedSpec
from pike_harness.errors import UserError
from pike_harness.host import candidate_sets, terminal
from pike_harness.host.candidate_sets import CandidateSet
from pike_harness.host.final_timing import describe_paired, unpaired_reason


@click.command("eval", cls=EvaluatorCommand)
@click.argument("candidate", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--task", "task_ref", metavar="SUITE/ID", help="The task of one candidate file, e.g. smoke/1.")
@click.option("--suite", "suite_name", metavar="SUITE",
              help="CANDIDATE is a folder of solutions for this suite (task_N.py or N_name.py).")
@click.option("--only", metavar="IDS", help="With --suite: only these task ids, e.g. 1-5,9.")
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help='A JSON-lines file of candidates: {"task": "SUITE/ID", "file": "PATH"} per line.')
@click.option("--json", "as_json", is_flag=True,
              help="Print the result record as one JSON object (one line per candidate for several).")
@click.option("--stages", "show_stages", is_flag=True,
              help="Then print where the time went (on stderr): each stage's total over the candidates "
                   "(slot wait, starting, building, importing, warming, device wait, checking, timing) and "
                   "each device's idle time by cause.")
@click.option("--against-reference", is_flag=True,
              help="Also time each correct candidate paired against its task's eager reference (alternating "
                   "blocks) and print its speedup with a 95% interval, the pairs, the stop reason and any flag.")
@click.option("--retime-halfwidth", type=finite_float(min=0.001, max=0.5), default=PairedSpec.target_halfwidth,
              show_default=True, help="With --against-reference: stop once the 95% interval is within +- this "
                                      "fraction.")
@click.option("--retime-max-seconds", type=finite_float(min=1), default=PairedSpec.max_seconds,
              show_default=True, help="With --against-reference: at most this many seconds of timed blocks per "
                                      "candidate.")
@evaluator_options
def eval_command(candidate: Path | None, task_ref: str | None, suite_name: str | None, only: str | None,
                 manifest: Path | None, as_json: bool, show_stages: bool, against_reference: bool,
                 retime_halfwidth: float, retime_max_seconds: float, **kwargs: Any) -> None:
    """Evaluate candidate files against their tasks: load each in a sandboxed process, check it on
    public and hidden input sets against the reference, time it, and print the verdict.

    \b
    One file:        pikeh eval CANDIDATE.py --task SUITE/ID
    A folder:        pikeh eval FOLDER --suite SUITE [--only IDS]   (task_N.py or N_name.py)
    A manifest:      pikeh eval --manifest FILE.jsonl
    Paired speedup:  pikeh eval FOLDER --suite SUITE --against-reference

    Several candidates go to one evaluator at once, with a progress bar and a table at the end (JSON
    lines with --json); Ctrl-C stops and reports what finished (exit status 130). The verdict is one
    of compile_error, runtime_error, timeout, incorrect, rejected (a cheat was detected; the result
    names the check) or correct (with a runtime). The exit status is 0 whenever the evaluations
    happened, whatever the verdicts.
    """
    values = pop_evaluator_values(kwargs)
    paired = PairedSpec(target_halfwidth=retime_halfwidth, max_seconds=retime_max_seconds) \
        if against_reference else None
    batch = _candidate_set(candidate, task_ref, suite_name, only, manifest)
    if batch is not None:
        from pike_harness.cli.eval_batch import evaluate_set

        evaluate_set(batch, values, as_json=as_json, show_stages=show_stages, paired=paired)
        return
    assert candidate is not None and task_ref is not None
    task = get_app().catalog.resolve(task_ref)
    try:
        source = candidate.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{candidate}: cannot read the candidate: {exc}") from None

    # A spinner on stderr (a terminal only: nothing in a pipe or with --json output captured) says which
    # stage the command is in; the first evaluation on a machine can take a minute.
    status = terminal.console(stderr=True).status(f"starting the {values.get('evaluator') or 'local'} evaluator",
                                         spinner="dots")
    with status, build_evaluator(values) as evaluator:
        status.update(f"evaluating {terminal.literal(candidate.name)} on {task.ref}: load, check against the "
                      "reference, time "
                      f"(protocol {values.get('protocol') or 'robust'}, device {values.get('device') or 'auto'})")
        try:
            result = evaluator.evaluate(task.eval_request(source, paired=paired))
        except EvaluatorError as exc:
            raise UserError(f"the evaluation could not run: {exc}") from None
        figures = evaluator.stats().get("stages") if show_stages else None
        status.update("closing the evaluator")
    if as_json:
        click.echo(json.dumps(result.to_dict(), sort_keys=True))
    else:
        _print(result, candidate, paired=paired is not None)
    if show_stages:
        print_stages(figures)


def print_stages(figures: dict[str, Any] | None) -> None:
    """``--stages``: the evaluator's stage breakdown on stderr, or why there is none."""
    from pike_harness.worker.supervise.engine.stage_breakdown import format_breakdown

    err = terminal.console(stderr=True)
    if not figures:
        err.print("--stages: this evaluator keeps no stage figures", highlight=False)
        return
    err.print(format_breakdown(figures), highlight=False)


def _candidate_set(candidate: Path | None, task_ref: str | None, suite_name: str | None, only: str | None,
                   manifest: Path | None) -> CandidateSet | None:
    """The candidates a folder or a manifest names; None for the one-file form (checked here)."""
    catalog = get_app().catalog
    if manifest is not None:
        if candidate is not None or task_ref or suite_name:
            raise UserError("--manifest names the candidates and their tasks: give no CANDIDATE, --task or --suite")
        return candidate_sets.from_manifest(manifest, catalog)
    if candidate is None:
        raise UserError("give a candidate file with --task SUITE/ID, a folder with --suite SUITE, or --manifest FILE")
    if candidate.is_dir():
        if task_ref:
            raise UserError(f"{candidate} is a folder: give --suite SUITE (its files map to task ids), not --task")
        if not suite_name:
            raise UserError(f"{candidate} is a folder: name the suite of its solutions with --suite")
        wanted = {task.id for task in catalog.select(suite_name, only)} if only else None
        return candidate_sets.from_folder(candidate, catalog.suite(suite_name), wanted=wanted)
    if suite_name or only:
        raise UserError("--suite and --only go with a folder of candidates; for one file give --task SUITE/ID")
    if not task_ref:
        raise UserError(f"{candidate.name}: give its task with --task SUITE/ID")
    return None


def _print(result: EvalResult, candidate: Path, *, paired: bool = False) -> None:

    console = terminal.console()
    colour = {"correct": "green", "incorrect": "red", "rejected": "magenta"}.get(result.category, "yellow")
    console.print(f"[bold]{terminal.literal(candidate.name)}[/bold] on {terminal.literal(result.task)}: "
                  f"[bold {colour}]{terminal.literal(result.category)}[/]")
    if result.reason:
        console.print(f"reason ({result.check}): {result.reason}", markup=False, highlight=False)
    if result.runtime is not None:
        r = result.runtime
        console.print(f"runtime {r.headline_ms:.4f} ms ({r.statistic} of {r.n}; median {r.median_ms:.4f}, "
                      f"mean {r.mean_ms:.4f}, min {r.min_ms:.4f}, stdev {r.stdev_ms:.4f}, cv {r.cv:.3f}, "
                      f"iqr {r.iqr_ms:.4f})", markup=False, highlight=False)
    worst = max((o for o in result.outputs if o.max_abs_diff is not None), key=lambda o: o.max_abs_diff or 0.0,
                default=None)
    if worst is not None:
        console.print(f"outputs: {len(result.outputs)} checked; largest diff abs {worst.max_abs_diff:.3g}, "
                      f"rel {worst.max_rel_diff:.3g} (input set {worst.input_set})", markup=False, highlight=False)
    if paired and result.is_correct:
        console.print(f"paired against the eager reference: {paired_text(result)}", markup=False)
    if result.flags:
        console.print(f"flags: {', '.join(result.flags)}", markup=False, highlight=False)
    protocol = result.protocol
    device = result.environment.get("gpu") or result.environment.get("cpu")
    console.print(f"protocol {protocol.get('name')} v{protocol.get('version')} on {result.environment.get('device')} "
                  f"({device}); stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.stage_seconds.items()),
                  markup=False, highlight=False)
    if not result.is_correct and result.stderr_tail.strip():
        console.print("[dim]stderr (last lines):[/dim]")
        console.print("\n".join(result.stderr_tail.strip().splitlines()[-15:]), markup=False, highlight=False)


def paired_text(result: EvalResult) -> str:
    """A correct result's paired speedup in one line, or why it has none."""
    return describe_paired(result.paired) if result.paired is not None else f"none ({unpaired_reason(result)})"
