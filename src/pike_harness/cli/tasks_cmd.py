"""``pikeh tasks``: list, show, check and audit the tasks of every suite."""

from __future__ import annotations

import json

import click
from rich.syntax import Syntax
from rich.table import Table

from pike_harness.cli import LazyGroup, get_app
from pike_harness.contracts.model import Task
from pike_harness.host import terminal


@click.group(cls=LazyGroup, lazy={
    "audit": "pike_harness.cli.audit_cmd:audit",
    "check": "pike_harness.cli.audit_cmd:check",
})
def tasks() -> None:
    """Browse and check task suites (built-in suites and --tasks-dir folders)."""


def task_dict(task: Task) -> dict:
    return {
        "ref": task.ref,
        "suite": task.suite,
        "id": task.id,
        "name": task.name,
        "path": str(task.path),
        "atol": task.meta.atol,
        "rtol": task.meta.rtol,
        "precision": task.meta.precision,
        "precision_rule": task.meta.precision_rule,
        "quirks": list(task.meta.quirks),
        "notes": task.meta.notes,
    }


@tasks.command("list")
@click.option("--suite", help="Only this suite (default: every suite).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of task objects.")
def list_tasks(suite: str | None, as_json: bool) -> None:
    """List tasks with their tolerances and recorded quirks."""
    catalog = get_app().catalog
    suites = [catalog.suite(suite)] if suite else catalog.suites
    rows = [task for s in suites for task in s.tasks()]
    if as_json:
        click.echo(json.dumps([task_dict(t) for t in rows], indent=2))
        return
    console = terminal.console()
    for s in suites:
        # A title that already starts with the suite's name ("smoke: six small tasks") is not prefixed twice.
        title = (s.title or str(s.path)).removeprefix(f"{s.name}: ")
        table = Table(title=f"{s.name}: {title}", caption=f"{s.path} (from {s.origin})",
                      caption_justify="left")
        for column in ("ref", "name", "atol", "rtol", "precision", "quirks"):
            table.add_column(column)
        for task in s.tasks():
            table.add_row(task.ref, task.name, f"{task.meta.atol:g}", f"{task.meta.rtol:g}",
                          task.meta.precision, "; ".join(task.meta.quirks))
        console.print(table)


@tasks.command("show")
@click.argument("ref", metavar="SUITE/ID")
@click.option("--json", "as_json", is_flag=True, help="Print the task's metadata and source as JSON.")
@click.option("--bound/--no-bound", default=None,
              help="Count the reference's FLOPs and least bytes and print its speed-of-light bound "
                   "(default: on, off with --json).")
@click.option("--device-name", metavar="NAME", default=None,
              help="Bound for this device (a GPU name as torch prints it, e.g. 'NVIDIA H100 80GB HBM3'; "
                   "default: this machine's GPU).")
@click.option("--peaks", "peak_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              metavar="FILE", help="Extra peak table (TOML, see docs/report.md), tried before the datasheet one.")
def show_task(ref: str, as_json: bool, bound: bool | None, device_name: str | None,
              peak_files: tuple[str, ...]) -> None:
    """Show one task's metadata, speed-of-light bound and source (e.g. `pikeh tasks show level3-pike/9`)."""
    task = get_app().catalog.resolve(ref)
    record = _bound(task, device_name, peak_files) if (bound if bound is not None else not as_json) else None
    if as_json:
        extra = {"speed_of_light": record} if record is not None else {}
        click.echo(json.dumps({**task_dict(task), **extra, "source": task.source}, indent=2))
        return
    console = terminal.console()
    console.print(f"[bold]{task.ref}[/bold]  {task.name}  ({task.path})")
    console.print(f"atol {task.meta.atol:g}  rtol {task.meta.rtol:g}  precision {task.meta.precision}  "
                  f"precision rule {task.meta.precision_rule}")
    for quirk in task.meta.quirks:
        console.print(f"[yellow]quirk:[/yellow] {quirk}")
    if task.meta.notes:
        console.print(f"notes: {task.meta.notes}")
    if record is not None:
        console.print(bound_line(record), soft_wrap=True)
    console.print(Syntax(task.source, "python", line_numbers=True))


def _bound(task: Task, device_name: str | None, peak_files: tuple[str, ...]) -> dict:
    """The task's counts and, where the device has peak figures, its speed-of-light bound."""
    from pike_harness.host import speed_of_light as sol

    counts, local_gpu = sol.count_work([(task.source, sol.bound_precision(task.meta.precision, task.meta.precision_rule,
                                                                          task.meta.atol, task.meta.rtol))],
                                       gpu_name=device_name is None)
    device = device_name or local_gpu
    peaks = sol.find_peaks(device, sol.load_peaks(peak_files))
    return {**sol.task_bound(task, counts[0], peaks), "device_name": device or "cpu",
            "peaks": sol.peaks_dict(peaks)}


def bound_line(record: dict) -> str:
    """One line: FLOPs, bytes, precision, and the bound (or why there is none)."""
    if record.get("error"):
        return f"speed of light: the reference could not be counted ({record['error']})"
    counts = (f"{record['flops'] / 1e9:.4g} GFLOP, {record['bytes'] / 1e6:.4g} MB at least "
              f"({record['precision']}, {record['bytes_per_float']} bytes per float)")
    if record.get("sol_ms") is None:
        return f"speed of light: {counts}; no peak figures for this device ({record['device_name']})"
    return (f"speed of light on {record['device_name']} ({record['device']} datasheet peaks): {record['sol_ms']:.4g} ms, "
            f"{record['bound']}-bound (compute {record['compute_ms']:.4g} ms, memory {record['memory_ms']:.4g} ms); "
            f"{counts}")
