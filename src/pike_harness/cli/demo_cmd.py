"""``pikeh demo``: the whole pipeline on the embedded defaults, in a few minutes on two CPU cores.

PIKE-B with the offline:mutate stand-in (not an LLM: it rewrites the reference with a catalogue of
transformations, some deliberately broken so the error-fixing agent has work) on the ``smoke`` suite,
evaluated by the ``local`` evaluator on this machine's device, then the report.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click
from rich.console import Console

from pike_harness.cli import get_app

DEMO_STRATEGY_OPTIONS = {"num_branches": 4, "max_fix_attempts": 2, "max_ideas": 4}
DEMO_QUERY_BUDGET = 12


def _cpu_protocol(device: str) -> str:
    """On a CPU the demo uses the short protocol; on a GPU the default one."""
    if device == "cpu":
        return "quick"
    if device == "auto":
        try:
            import torch

            return "robust" if torch.cuda.is_available() else "quick"
        except ImportError:
            return "quick"
    return "robust"


@click.command()
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("pikeh-demo"),
              show_default=True,
              help="Where the demo's run and report go.")
@click.option("--device", default="auto", show_default=True, help="auto (GPU if there is one), cpu or cuda.")
@click.option("--query-budget", type=click.IntRange(min=1), default=DEMO_QUERY_BUDGET, show_default=True,
              help="LLM queries per task.")
@click.option("--fresh", is_flag=True, help="Delete this demo's earlier run and report first, and start over.")
def demo(output_dir: Path, device: str, query_budget: int, fresh: bool) -> None:
    """Run PIKE-B with offline:mutate on the smoke suite, then write the report (resumable, like any run)."""
    from pike_harness.launch import launch_run

    console = Console(stderr=True)
    if fresh:
        for folder in (output_dir / "runs" / "demo", output_dir / "report"):
            if folder.is_dir():
                shutil.rmtree(folder)
    core = {"strategy": "pike-b", "suite": "smoke", "llm": "offline:mutate", "query_budget": query_budget,
            "seed": 0, "run_name": "demo", "output_dir": output_dir / "runs", "llm_concurrency": 4}
    evaluator = {"evaluator": "local", "device": device, "protocol": _cpu_protocol(device)}
    console.print("[bold]pikeh demo[/bold]: PIKE-B on the smoke suite with offline:mutate "
                  "(an offline stand-in, not an LLM)")
    status = launch_run(get_app(), core, dict(DEMO_STRATEGY_OPTIONS), evaluator, console=console)
    if status == "interrupted":
        sys.stdout.flush()
        os._exit(130)
    report_dir = output_dir / "report"
    from pike_harness.cli import App
    from pike_harness.reporting import ReportOptions

    if "duckdb" not in App.host().names("reporters"):
        console.print(f"run finished in {output_dir / 'runs' / 'demo'}; no reporter plugin is installed")
        return
    reporter = App.host().get("reporters", "duckdb")()
    summary = reporter.report(ReportOptions(inputs=[output_dir / "runs"], output=report_dir))
    index = summary.output / "index.html"
    console.print(f"run: {output_dir / 'runs' / 'demo'}\nreport: {index if index.exists() else summary.output}")
    if status != "complete":
        sys.exit(1)  # the report is written either way: it shows what went wrong
