"""``pikeh tasks``: list, show, check and audit the tasks of every suite."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from pike_harness.cli import LazyGroup, get_app
from pike_harness.contracts.model import Task


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
    console = Console()
    for s in suites:
        table = Table(title=f"{s.name}: {s.title or s.path}", caption=f"{s.path} (from {s.origin})",
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
def show_task(ref: str, as_json: bool) -> None:
    """Show one task's metadata and source (e.g. `pikeh tasks show level3-pike/9`)."""
    task = get_app().catalog.resolve(ref)
    if as_json:
        click.echo(json.dumps({**task_dict(task), "source": task.source}, indent=2))
        return
    console = Console()
    console.print(f"[bold]{task.ref}[/bold]  {task.name}  ({task.path})")
    console.print(f"atol {task.meta.atol:g}  rtol {task.meta.rtol:g}  precision {task.meta.precision}  "
                  f"precision rule {task.meta.precision_rule}")
    for quirk in task.meta.quirks:
        console.print(f"[yellow]quirk:[/yellow] {quirk}")
    if task.meta.notes:
        console.print(f"notes: {task.meta.notes}")
    console.print(Syntax(task.source, "python", line_numbers=True))
