"""``pikeh eval`` on many candidates: all submitted to one evaluator at once, a progress bar while they
run, a table (or JSON lines) as they finish. Ctrl-C stops the evaluator and reports what finished.

The evaluator schedules the requests itself (CPU slots for loading and builds, the device lock for
checking and timing), exactly as a run or ``benchmarks/fidelity.py`` submits them, so evaluating a
folder of published solutions needs no script against the API.
"""

from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any

import click

from pike_harness.contracts.evaluation import EvaluatorError
from pike_harness.contracts.model import EvalResult, PairedSpec
from pike_harness.host import terminal
from pike_harness.host.candidate_sets import Candidate, CandidateSet

INTERRUPTED_STATUS = 130  # what a shell reports for a command stopped by SIGINT
COLOURS = {"correct": "green", "incorrect": "red", "rejected": "magenta"}


@dataclass
class Row:
    candidate: Candidate
    result: EvalResult | None = None
    error: str | None = None  # the evaluator failed on this one (not a verdict on the candidate)

    @property
    def verdict(self) -> str:
        return self.result.category if self.result is not None else "evaluator_error"

    def record(self) -> dict[str, Any]:
        """One JSON line: the result record with the candidate's file, or the evaluator's error."""
        base = {"file": str(self.candidate.path), "task": self.candidate.task.ref}
        if self.result is not None:
            return {**self.result.to_dict(), **base}
        return {**base, "category": "evaluator_error", "reason": self.error}


def evaluate_set(batch: CandidateSet, values: dict[str, Any], *, as_json: bool, show_stages: bool = False,
                 paired: PairedSpec | None = None) -> None:
    """Evaluate every candidate of ``batch`` concurrently and report (``show_stages``: then where the
    time went, ``pikeh eval --stages``); exits 130 after Ctrl-C. ``paired`` (``--against-reference``):
    each correct candidate is also timed paired against its eager reference."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from pike_harness.cli.evaluator_options import build_evaluator

    sources = [(candidate, candidate.source()) for candidate in batch.candidates]  # unreadable: one line, now
    err = terminal.console(stderr=True)
    for note in batch.skipped:
        err.print(f"[dim]skipped {terminal.literal(note)}[/dim]", highlight=False)
    rows: list[Row] = []
    interrupted = False
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, transient=True)
    with progress, build_evaluator(values) as evaluator:
        bar = progress.add_task("submitting", total=len(sources))
        futures: dict[Future, Candidate] = {evaluator.submit(candidate.task.eval_request(source, paired=paired)):
                                            candidate for candidate, source in sources}
        progress.update(bar, description=_tally(rows, len(sources)))
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    row = _row(futures[future], future)
                    rows.append(row)
                    if as_json:
                        progress.console.file.flush()
                        click.echo(json.dumps(row.record(), sort_keys=True))
                    progress.advance(bar)
                progress.update(bar, description=_tally(rows, len(sources)))
        except KeyboardInterrupt:
            interrupted = True
            for future in pending:
                future.cancel()
            progress.update(bar, description="interrupted: stopping the evaluator")
        figures = evaluator.stats().get("stages") if show_stages else None
    if not as_json:
        _table(rows, paired=paired is not None)
    if show_stages:
        from pike_harness.cli.eval_cmd import print_stages

        print_stages(figures)
    finished = f"{len(rows)} of {len(sources)} candidates evaluated"
    if interrupted:
        err.print(f"interrupted: {finished}; the others were not evaluated")
        raise SystemExit(INTERRUPTED_STATUS)
    if not as_json:
        err.print(finished)


def _row(candidate: Candidate, future: Future) -> Row:
    try:
        return Row(candidate, result=future.result())
    except EvaluatorError as exc:
        return Row(candidate, error=str(exc)[:500])


def _tally(rows: list[Row], total: int) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    text = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    return f"evaluating {total} candidates" + (f" ({terminal.literal(text)})" if text else "")


def _table(rows: list[Row], *, paired: bool = False) -> None:
    """One row per candidate (task order), then the reason of each one that is not correct, in full;
    ``paired``: each correct one's speedup over its eager reference, below the table."""
    from rich.table import Table

    from pike_harness.cli.eval_cmd import paired_text

    console = terminal.console()
    table = Table(title="pikeh eval", title_justify="left")
    for name in ("task", "file", "verdict", "check", "runtime ms", "flags"):
        table.add_column(name, justify="right" if name == "runtime ms" else "left", overflow="fold")
    ordered = sorted(rows, key=lambda r: (r.candidate.task.ref, r.candidate.path.name))
    for row in ordered:
        result = row.result
        if result is None:
            table.add_row(row.candidate.task.ref, terminal.literal(row.candidate.label), "[yellow]evaluator_error[/]", "",
                          "", "")
            continue
        colour = COLOURS.get(result.category, "yellow")
        runtime = f"{result.runtime_ms:.4f}" if result.runtime_ms is not None else ""
        flags = ", ".join(f for f in result.flags if not f.startswith("technique:"))
        table.add_row(row.candidate.task.ref, terminal.literal(row.candidate.label),
                      f"[{colour}]{terminal.literal(result.category)}[/]", terminal.literal(result.check or ""),
                      runtime, terminal.literal(flags))
    console.print(table)
    if paired:
        for row in ordered:
            if row.result is not None and row.result.is_correct:
                console.print(f"{row.candidate.label} ({row.candidate.task.ref}) paired against the eager reference: "
                              f"{paired_text(row.result)}", markup=False, highlight=False, soft_wrap=True)
    for row in ordered:
        reason = row.error if row.result is None else row.result.reason
        if reason:
            console.print(f"{row.candidate.label} ({row.candidate.task.ref}): {reason}", markup=False,
                          highlight=False, soft_wrap=True)
