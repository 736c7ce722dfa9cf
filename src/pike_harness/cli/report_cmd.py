"""``pikeh report``: metrics, figures, tables and an HTML report from run directories and baselines.

The work is done by a reporter plugin (``--reporter``, default ``duckdb``); this command gathers the
inputs, adds the chosen reporter's own options (``pikeh report --help`` shows the default reporter's),
hands it what only the host has (the task catalogue and evaluator plugins, for re-timing), and prints
the headline table. Reporters never write into run directories, so reporting a running run is safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pike_harness.cli import App, get_app
from pike_harness.cli.config_options import attach_options, dataclass_options
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    _peek,
    build_evaluator,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.contracts.reporting import (
    FORMATS,
    Reporter,
    ReportOptions,
    ReportServices,
    ReportSummary,
    shown_columns,
)
from pike_harness.host import terminal
from pike_harness.host.output_paths import check_output_dir

DEFAULT_REPORTER = "duckdb"
REPORTER_OPTION = "pikeh_reporter_option"


class ReportCommand(EvaluatorCommand):
    """Adds the chosen evaluator's (for --retime) and reporter's options (its Config's fields) before
    parsing, so they parse and show in --help."""

    def _add_dynamic_options(self, args: list[str]) -> None:
        super()._add_dynamic_options(args)
        name = _peek(args, "--reporter") or DEFAULT_REPORTER
        host = App.host()
        known = name in host.names("reporters")
        attach_options(self, dataclass_options(host.get("reporters", name).Config, tag=REPORTER_OPTION) if known else [],
                       tag=REPORTER_OPTION, owner=f"reporter {name!r}")


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
      pikeh report --input runs/ --retime                   # re-time each final best paired
    """
    check_output_dir(output, "--output")
    host = App.host()
    reporter_cls = host.get("reporters", reporter)
    own = {p.name for p in ctx.command.params if getattr(p, REPORTER_OPTION, False)}
    chosen = reporter_cls(reporter_cls.make_config({k: extra.pop(k) for k in own if k in extra}))
    app = get_app(ctx)
    def progress(message: str) -> None:
        click.echo(f"pikeh report: {message}", err=True)

    # The evaluator options (`--evaluator`, `--device`, `--protocol`, each plugin's own) are for
    # reporters that re-evaluate code (`--retime`); they are built only if one asks.
    values = pop_evaluator_values(extra)
    services = ReportServices(
        progress=progress, resolve_task=app.catalog.resolve, make_evaluator=lambda: build_evaluator(values),
        evaluation={"evaluator": values.get("evaluator") or "local", "device": values.get("device") or "auto",
                    "protocol": values.get("protocol") or "robust"})
    wanted = [r.strip() for r in runs.split(",") if r.strip()] if runs else None
    options = ReportOptions(inputs=list(inputs), output=output, runs=wanted, formats=_formats(formats),
                            services=services)
    summary = chosen.report(options)
    if as_json:
        import json

        click.echo(json.dumps(summary.rows, indent=2, default=str))
    else:
        print_summary(summary, chosen)
    for note in third_party_notes(host, reporter, list(inputs), summary):
        click.echo(f"third-party plugin: {note}", err=as_json)


def third_party_notes(host: Any, reporter: str, inputs: list[Path], summary: ReportSummary) -> list[str]:
    """Every third-party plugin behind this report: its reporter, and each reported run's (from run.json),
    so a plugin that replaced a built-in never goes unnoticed in a result."""
    import json

    from pike_harness.host.store import RUN_FILE, find_runs

    notes = [f"this report: {line}" for line in host.provenance(reporter=reporter)["third_party"]]
    reported = {row.get("run") for row in summary.rows}
    for run_dir in dict.fromkeys(find_runs(inputs)):
        try:
            meta = json.loads((run_dir / RUN_FILE).read_text())
        except (OSError, ValueError):
            continue
        name = meta.get("name") or run_dir.name
        if summary.rows and name not in reported:
            continue
        notes += [f"run {name}: {line}" for line in (meta.get("plugins") or {}).get("third_party") or []]
    return notes


def print_summary(summary: ReportSummary, reporter: Reporter) -> None:
    """The headline numbers per run, as a rich table that fits 80 columns, and where the files went."""
    from rich import box
    from rich.table import Table

    console = terminal.console()
    table = Table(title="pikeh report", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    shown = shown_columns(reporter.columns, summary.rows)
    for i, column in enumerate(shown):
        if i == 0:
            table.add_column(column.title, overflow="fold", ratio=1, min_width=8)
        else:
            table.add_column(column.title, justify="right", no_wrap=True)
    for row in summary.rows:
        table.add_row(*(column.cell(row) for column in shown))
    console.print(table)
    if reporter.legend:
        console.print(reporter.legend, style="dim")
    html = summary.output / "index.html"
    console.print(f"wrote {len(summary.files)} file(s) to {summary.output}" + (f"; open {html}" if html in summary.files else ""))

