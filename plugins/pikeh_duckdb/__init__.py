"""pikeh_duckdb: the built-in ``duckdb`` reporter and the ``pikeh import pike`` command.

Importing this module is cheap (every ``pikeh`` invocation imports every plugin): duckdb, altair and
vl-convert are imported only when a report is made.
"""

from __future__ import annotations

from typing import Any

from pike_harness.api import RegisterReporter, Reporter, ReportOptions, ReportSummary, hookimpl

from .options import COLUMNS, LEGEND, DuckDBConfig


class DuckDBReporter(Reporter):
    """Loads runs and baselines into DuckDB, computes every metric in SQL, writes figures and the HTML report
    (reporter.py; heavy imports happen there, when a report is made)."""

    name = "duckdb"
    description = ("metrics in DuckDB SQL, paper figures (PNG/SVG via vl-convert), CSV/LaTeX tables and a "
                   "self-contained HTML report")
    Config = DuckDBConfig
    columns = COLUMNS
    legend = LEGEND

    def report(self, options: ReportOptions) -> ReportSummary:
        from .reporter import build_report

        return build_report(options, self.config)


@hookimpl
def register_reporters(register: RegisterReporter) -> None:
    register(DuckDBReporter)


@hookimpl
def register_commands(cli: Any) -> None:
    from .pike_import import import_group

    cli.add_command(import_group, "import")
