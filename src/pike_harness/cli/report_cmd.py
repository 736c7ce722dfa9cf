"""``pikeh report``: metrics, figures, tables and an HTML report from run directories and baselines.

The work is done by a reporter plugin (``--reporter``, default ``duckdb``); this command gathers the
inputs, adds the chosen reporter's own options (``pikeh report --help`` shows the default reporter's),
hands it what only the host has (the task catalogue and evaluator plugins, for re-timing), and prints
the headline table. Reporters never write into run directories, so reporting a running run is safe.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from pike_harness.cli import App, get_app
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    build_evaluator,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.cli.run_cmd import _peek
from pike_harness.errors import UserError
from pike_harness.reporting import FORMATS, ReportOptions, ReportSummary

DEFAULT_REPORTER = "duckdb"


class ReportCommand(EvaluatorCommand):
    """Adds the chosen reporter's options before parsing, so they parse and show in --help."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        name = _peek(args, "--reporter") or DEFAULT_REPORTER
        host = App.host()
        if name in host.names("reporters"):
            existing = {opt for p in self.params for opt in p.opts}
            for option in getattr(host.get("reporters", name), "options", []) or []:
                if any(option is p for p in self.params):
                    continue  # added by an earlier invocation in this process
                if any(o in existing for o in option.opts):
                    raise UserError(f"reporter {name!r} defines option {option.opts[0]}, which `pikeh report` "
                                    "already has; its author must rename it")
                option.pikeh_reporter_option = True  # type: ignore[attr-defined]
                self.params.append(option)
        return super().parse_args(ctx, args)


def _formats(text: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise click.BadParameter(f"choose among {','.join(FORMATS)} (got {text!r})", param_hint="--format")
    return chosen


@click.command(cls=ReportCommand, context_settings={"max_content_width": 110})
@click.option("--input", "inputs", multiple=True, required=True, type=click.Path(path_type=Path),
              help="A run directory, a folder of runs, or a `pikeh baselines` folder (repeatable).")
@click.option("--output", type=click.Path(path_type=Path), default=Path("report"), show_default=True,
              help="Folder for the report (created; files in it are replaced).")
@click.option("--runs", help="Only these runs: names or glob patterns, comma separated.")
@click.option("--format", "formats", default=",".join(FORMATS), show_default=True,
              help=f"Comma-separated outputs among {','.join(FORMATS)} (report.duckdb is always written).")
@click.option("--reporter", default=DEFAULT_REPORTER, show_default=True, help="Reporter plugin.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary rows as JSON instead of a table.")
@evaluator_options
@click.pass_context
def report(ctx: click.Context, inputs: tuple[Path, ...], output: Path, runs: str | None, formats: str,
           reporter: str, as_json: bool, **extra: Any) -> None:
    """Report on runs: suite score vs queries and dollars, fast_p, outcomes, per-task tables, HTML.

    Works on runs that are still going (it reads their journals). Several --input folders, strategies,
    models and seeds are reported side by side.

    \b
    Examples:
      pikeh report --input runs/ --output report/
      pikeh report --input runs/a --input runs/b --input baselines/h100 --format png,csv
      pikeh report --input runs/ --retime --repeats 10      # confirm the best solutions' speedups
    """
    host = App.host()
    chosen = host.get("reporters", reporter)()
    app = get_app(ctx)
    def progress(message: str) -> None:
        click.echo(f"pikeh report: {message}", err=True)

    # The evaluator options (`--evaluator`, `--device`, `--protocol`, each plugin's own) are for
    # reporters that re-evaluate code (`--retime`); they are built only if one asks.
    values = pop_evaluator_values(extra)
    extra.update(progress=progress, resolve_task=app.catalog.resolve, make_evaluator=lambda: build_evaluator(values),
                 evaluation={"evaluator": values.get("evaluator") or "local", "device": values.get("device") or "auto",
                             "protocol": values.get("protocol") or "robust"})
    wanted = [r.strip() for r in runs.split(",") if r.strip()] if runs else None
    options = ReportOptions(inputs=list(inputs), output=output, runs=wanted, formats=_formats(formats), extra=extra)
    summary = chosen.report(options)
    if as_json:
        import json

        click.echo(json.dumps(summary.rows, indent=2, default=str))
    else:
        print_summary(summary)


def print_summary(summary: ReportSummary) -> None:
    """The headline numbers per run, as a rich table that fits 80 columns, and where the files went."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout)
    table = Table(title="pikeh report", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    columns = [("run", "run", "l"), ("tasks", "n_with_baseline", "r"), ("queries", "queries_done", "r"),
               ("score", "score", "x"), ("raw", "score_raw", "x"), ("solved", "n_solved", "r"),
               ("fast_1", "fast_1", "%"), ("@$", "money_score", "x"), ("$/task", "usd_per_task", "$"),
               ("EFA", "efa_repaired", "r"), ("confirmed", "confirmed_score", "x")]
    shown = [c for c in columns if c[1] != "confirmed_score" or any(r.get("confirmed_score") for r in summary.rows)]
    for title, _, kind in shown:
        if kind == "l":
            table.add_column(title, overflow="fold", ratio=1, min_width=8)
        else:
            table.add_column(title, justify="right", no_wrap=True)
    for row in summary.rows:
        table.add_row(*(_cell(row, key, kind) for _, key, kind in shown))
    console.print(table)
    console.print("score: geomean speedup over eager (clamped) at the full budget; raw: unclamped; "
                  "@$: score at the money budget; EFA: failed lineages the error-fixing agent repaired",
                  style="dim")
    html = summary.output / "index.html"
    console.print(f"wrote {len(summary.files)} file(s) to {summary.output}" + (f"; open {html}" if html.exists() else ""))


def _cell(row: dict[str, Any], key: str, kind: str) -> str:
    value = row.get(key)
    if key == "run":
        return f"{value} ({row.get('status')})" if row.get("status") != "complete" else str(value)
    if key in ("money_score", "usd_per_task") and row.get("unknown_cost_calls"):
        return "?"
    if key == "efa_repaired":
        return f"{value or 0}/{row.get('efa_failed') or 0}"
    if value is None:
        return "-"
    if kind == "x":
        return f"{float(value):.3f}x"
    if kind == "%":
        return f"{float(value) * 100:.0f}%"
    if kind == "$":
        return f"${float(value):.2f}"
    if key == "queries_done":
        return f"{value}/{row.get('budget')}"
    return str(value)
