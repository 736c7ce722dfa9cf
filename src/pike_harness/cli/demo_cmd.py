"""``pikeh demo``: the whole pipeline on the embedded defaults, in a few minutes on two CPU cores.

What runs is not decided here: plugins register demos (``register_demos``, pike_harness.contracts.demo) and this
command runs the one named ``default`` (or ``--demo NAME``) with the ``local``-style evaluator options
of this machine's device, then its reporter. The built-in ``default`` is PIKE-B with the offline:mutate
stand-in on the ``smoke`` suite; a third-party plugin that registers ``default`` replaces it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from pike_harness.cli import App, get_app
from pike_harness.contracts.demo import DEFAULT_DEMO, Demo
from pike_harness.errors import UserError
from pike_harness.host import terminal
from pike_harness.host.plugins import SINGULAR

DEMO_SEEDS = "0,1"  # two seeds: the report's bands and intervals have something to show
# The demo shows each task's final re-timing (paired against the reference) without its minute per task.
DEMO_RETIME_SECONDS = 10.0


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


def chosen_demo(name: str) -> Demo:
    """The registered demo NAME, refusing one whose plugins are not all installed (one clear line)."""
    host = App.host()
    demo: Demo = host.get("demos", name)
    missing = [f"{SINGULAR[kind]} {value!r}" for kind, value in demo.requirements() if value not in host.names(kind)]
    if missing:
        raise UserError(f"demo {name!r} (from plugin {host.provider_of('demos', name)}) needs "
                        f"{', '.join(missing)}, which no installed plugin provides")
    return demo


@click.command()
@click.option("--demo", "demo_name", default=DEFAULT_DEMO, show_default=True, metavar="NAME",
              help="Which registered demo to run (`pikeh plugins` lists them).")
@click.option("--output-dir", type=click.Path(path_type=Path), default=Path("pikeh-demo"),
              show_default=True, help="Where the demo's run and report go.")
@click.option("--device", default="auto", show_default=True, help="auto (GPU if there is one), cpu or cuda.")
@click.option("--query-budget", type=click.IntRange(min=1), help="LLM queries per task (default: the demo's).")
@click.option("--seeds", default=DEMO_SEEDS, show_default=True, metavar="LIST",
              help="Seeds to run (one run each, as `pikeh run --seeds`); the report draws 95% bands over them.")
@click.option("--fresh", is_flag=True, help="Delete this demo's earlier run and report first, and start over.")
def demo(demo_name: str, output_dir: Path, device: str, query_budget: int | None, seeds: str, fresh: bool) -> None:
    """Run the default demo (PIKE-B with offline:mutate on the smoke suite), then write the report.

    Two seeds by default, so the report shows confidence bands. Resumable, like any run. Plugins register
    demos; a third-party `default` replaces the built-in one.
    """
    from pike_harness.host.output_paths import check_output_dir
    from pike_harness.host.seed_group import launch_seeds, parse_seeds

    check_output_dir(output_dir, "--output-dir")
    chosen = chosen_demo(demo_name)
    console = terminal.console(stderr=True)
    run_name = "demo" if chosen.name == DEFAULT_DEMO else f"demo-{chosen.name}"
    if fresh:
        for folder in (output_dir / "runs" / run_name, output_dir / "report"):
            if folder.is_dir():
                shutil.rmtree(folder)
    core = {"strategy": chosen.strategy, "suite": chosen.suite, "tasks": chosen.tasks, "llm": chosen.llm,
            "query_budget": query_budget or chosen.query_budget, "seed": 0, "run_name": run_name,
            "output_dir": output_dir / "runs", "llm_concurrency": chosen.llm_concurrency,
            "retime_max_seconds": DEMO_RETIME_SECONDS}
    evaluator = {"evaluator": chosen.evaluator, "device": device, "protocol": chosen.protocol or _cpu_protocol(device)}
    console.print(f"[bold]pikeh demo[/bold] {chosen.name}: {chosen.description or chosen.strategy}")
    status = launch_seeds(get_app(), core, dict(chosen.strategy_options), evaluator, parse_seeds(seeds),
                          console=console)
    if status == "interrupted":
        sys.stdout.flush()
        os._exit(130)
    run_dir = output_dir / "runs" / run_name  # the seed group: one run directory per seed
    if chosen.reporter is None:
        console.print(f"run: {run_dir}")
    else:
        from pike_harness.contracts.reporting import ReportOptions

        reporter = App.host().get("reporters", chosen.reporter)()
        summary = reporter.report(ReportOptions(inputs=[output_dir / "runs"], output=output_dir / "report"))
        index = summary.output / "index.html"
        console.print(f"run: {run_dir}\nreport: {index if index.exists() else summary.output}")
    if status != "complete":
        sys.exit(1)  # the report is written either way: it shows what went wrong
