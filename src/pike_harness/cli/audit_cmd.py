"""``pikeh tasks check`` and ``pikeh tasks audit``: is each task built as recorded, and can its check be trusted?

Thin on purpose: the measuring is in ``pike_harness.host.audit`` and the rendering in
``pike_harness.host.audit_report``; both are imported inside the commands, so ``pikeh tasks --help``
never imports torch.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from pike_harness.cli import get_app
from pike_harness.cli.config_options import finite_float
from pike_harness.contracts.model import Task
from pike_harness.errors import UserError
from pike_harness.host import terminal

FORMATS = ("table", "json", "markdown")


def select_tasks(suite: str | None, tasks_spec: str | None) -> list[Task]:
    """The tasks named on the command line: one suite (optionally some ids) or every suite."""
    catalog = get_app().catalog
    if tasks_spec and not suite:
        raise UserError("--tasks needs --suite (task ids are per suite), e.g. --suite level3-pike --tasks 1-4")
    if suite:
        return catalog.select(suite, tasks_spec)
    return [task for s in catalog.suites for task in s.tasks()]


@click.command("check")
@click.option("--suite", help="Only this suite (default: every suite).")
@click.option("--tasks", "tasks_spec", metavar="IDS", help="Only these task ids, e.g. 1-5,9 (needs --suite).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per task.")
def check(suite: str | None, tasks_spec: str | None, as_json: bool) -> None:
    """Build every task on the meta device and check shapes and parameter counts (seconds, no GPU).

    Each model is constructed and run without data, so even 1 GB inputs cost nothing. Where the
    suite's metadata records parameter counts and shapes, they are compared; any mismatch, or a task
    that cannot be built, exits 1.
    """
    from dataclasses import asdict

    from pike_harness.host.audit import check_task
    from pike_harness.host.audit_report import render_check_table

    tasks = select_tasks(suite, tasks_spec)
    results = [check_task(task) for task in tasks]
    if as_json:
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    else:
        render_check_table(results, terminal.console())
    failed = [r for r in results if r.status != "ok"]
    if failed:
        first = failed[0]
        raise UserError(f"{len(failed)} of {len(results)} tasks failed the check; first: {first.ref}: "
                        f"{first.error or '; '.join(first.problems)}")


@click.command("audit")
@click.option("--suite", help="Only this suite (default: every suite).")
@click.option("--tasks", "tasks_spec", metavar="IDS", help="Only these task ids, e.g. 1-5,9 (needs --suite).")
@click.option("--device", help="cpu, cuda or cuda:N (default: cuda when torch sees a GPU, else cpu).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="How to print the report: a table, JSON for machines, or markdown for reports/.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of stdout.")
@click.option("--from-json", "from_json", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Render a saved JSON audit (from --json) instead of running one.")
@click.option("--fast", is_flag=True, help="Only the meta-device shape and parameter check (= pikeh tasks check).")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="Untimed forward calls before timing.")
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True,
              help="Timed forward calls (fewer if --time-budget runs out).")
@click.option("--time-budget", type=finite_float(min=0), default=5.0, show_default=True,
              help="Seconds of timed calls per task before timing stops early.")
@click.option("--strict", is_flag=True,
              help="Exit 1 when a task has a finding that its suite does not record as a known quirk.")
@click.option("--title", help="Heading of the markdown report.")
@click.pass_context
def audit(ctx: click.Context, suite: str | None, tasks_spec: str | None, device: str | None, fmt: str,
          as_json: bool, output: Path | None, from_json: Path | None, fast: bool, warmup: int, reps: int,
          time_budget: float, strict: bool, title: str | None) -> None:
    """Run each reference and report whether its correctness check can be trusted.

    Per task: output shape and dtype; output magnitude against the tolerances (flags outputs an
    all-zero answer would match); whether the output changes with the input seed (0 vs 1) and the
    weight seed (1 vs 2); finiteness; determinism across two runs; parameter count; and a rough eager
    runtime. References run one at a time in this process.

    \b
    Examples:
      pikeh tasks audit --suite smoke --device cpu
      pikeh tasks audit --suite level3-pike --tasks 1,2,4,20 --device cpu
      pikeh tasks audit --suite level3-pike --device cuda --json -o audit.json
      pikeh tasks audit --from-json audit.json --format markdown -o reports/audit-level3-pike.md
    """
    if as_json:
        fmt = "json"
    # Options that would be silently ignored are refused instead.
    if fast:
        ignored = [name for name, given in (("--output", output), ("--format markdown", fmt == "markdown"),
                                            ("--strict", strict), ("--device", device), ("--from-json", from_json),
                                            ("--title", title)) if given]
        if ignored:
            raise click.UsageError(f"--fast only checks shapes on the meta device; it takes no {', '.join(ignored)}")
        ctx.invoke(check, suite=suite, tasks_spec=tasks_spec, as_json=fmt == "json")
        return
    if from_json is not None and (suite or tasks_spec or device):
        raise click.UsageError("--from-json renders a saved audit as it is; drop --suite, --tasks and --device")

    if from_json is not None:
        report = _read_report(from_json)
    else:
        report = _run(suite, tasks_spec, device, warmup, reps, time_budget)
    _emit(report, fmt, output, title)

    errors = [t for t in report.tasks if t.verdict == "error"]
    if errors:
        raise UserError(f"{len(errors)} of {len(report.tasks)} tasks could not be audited; first: "
                        f"{errors[0].ref}: {errors[0].error}")
    unknown = [t for t in report.tasks if t.unknown_findings]
    if strict and unknown:
        codes = ", ".join(f.code for f in unknown[0].unknown_findings)
        raise UserError(f"{len(unknown)} tasks have findings not recorded as known quirks; first: "
                        f"{unknown[0].ref}: {codes}")


def _run(suite: str | None, tasks_spec: str | None, device: str | None, warmup: int, reps: int,
         time_budget: float) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pike_harness.host.audit import AuditOptions, resolve_device, run_audit

    tasks = select_tasks(suite, tasks_spec)
    options = AuditOptions(device=resolve_device(device), warmup=warmup, reps=reps, time_budget_s=time_budget)
    console = terminal.console(stderr=True)
    if not console.is_terminal:  # a log, not a screen: one line per task instead of a live bar
        def log_line(task: Task) -> None:
            console.print(f"auditing {task.ref} on {options.device}", highlight=False)

        return run_audit(tasks, options, progress=log_line)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task(f"auditing on {options.device}", total=len(tasks))
        started: list[Task] = []

        def on_task(task: Task) -> None:
            if started:
                progress.advance(bar)
            started.append(task)
            progress.update(bar, description=f"auditing {task.ref} on {options.device}")

        report = run_audit(tasks, options, progress=on_task)
        progress.advance(bar)
    return report


def _read_report(path: Path) -> Any:
    from pike_harness.host.audit_report import AuditReport

    try:
        return AuditReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a saved audit (write one with `pikeh tasks audit --json -o FILE`): "
                        f"{exc}") from None


def _emit(report: Any, fmt: str, output: Path | None, title: str | None) -> None:
    from pike_harness.host.audit_report import render_audit_markdown, render_audit_table

    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=2) + "\n"
    elif fmt == "markdown":
        text = render_audit_markdown(report, title=title)
    elif output is None:
        render_audit_table(report, terminal.console())
        return
    else:
        console = Console(record=True, width=200, file=io.StringIO())
        render_audit_table(report, console)
        text = console.export_text()
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror}") from None
    click.echo(f"wrote {output}", err=True)
