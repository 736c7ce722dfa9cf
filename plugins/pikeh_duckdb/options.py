"""The ``duckdb`` reporter's own ``pikeh report`` options (kept apart so the CLI loads them without duckdb)."""

from __future__ import annotations

from pathlib import Path

import click

OPTIONS = [
    click.Option(["--budget"], type=click.IntRange(min=1),
                 help="Query budget per task for curves and final scores (default: each run's own)."),
    click.Option(["--money-step"], type=click.FloatRange(min=0.001), default=0.20, show_default=True,
                 help="Spacing of the money curve in USD per task."),
    click.Option(["--money-max"], type=click.FloatRange(min=0.001), default=25.0, show_default=True,
                 help="Right end of the money curve in USD per task (PIKE: 25 for level 3-pike, 50 for level 5)."),
    click.Option(["--money-budget"], type=click.FloatRange(min=0),
                 help="USD per task for the marker on the final-score chart (default: the run's money budget, "
                      "else --money-max)."),
    click.Option(["--price-as"], metavar="PROVIDER:MODEL",
                 help="Cost every run's token counts at this model's prices (e.g. google:gemini-2.5-pro), to "
                      "compare runs of offline or self-hosted models in dollars."),
    click.Option(["--prices", "prices"], multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="Extra price file(s) (TOML, the format of the shipped prices.toml); later ones win."),
    click.Option(["--title"], default="pike-harness report", show_default=True, help="Title of the HTML report."),
    click.Option(["--retime"], is_flag=True,
                 help="Re-time each task's best solution side by side with its eager reference (interleaved) "
                      "and report those confirmed speedups with 95% intervals."),
    click.Option(["--repeats"], type=click.IntRange(min=2), default=10, show_default=True,
                 help="With --retime: reference/candidate pairs per task (timed by the evaluator that "
                      "--evaluator, --device, --protocol and the evaluator's own options describe)."),
]
