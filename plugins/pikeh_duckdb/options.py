"""The ``duckdb`` reporter's options and summary columns (kept apart so the CLI loads them without duckdb).

``DuckDBConfig``'s fields become ``pikeh report`` options when this reporter is chosen (the ``Config``
mechanism strategies and evaluators share); ``COLUMNS`` are the summary table the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pike_harness.api import Column


@dataclass
class DuckDBConfig:
    budget: int | None = field(default=None, metadata={
        "min": 1, "help": "Query budget per task for curves and final scores (default: each run's own)."})
    money_step: float = field(default=0.20, metadata={
        "min": 0.001, "help": "Spacing of the money curve in USD per task."})
    money_max: float = field(default=25.0, metadata={
        "min": 0.001, "help": "Right end of the money curve in USD per task (PIKE: 25 for level 3-pike, 50 for level 5)."})
    money_budget: float | None = field(default=None, metadata={
        "min": 0, "help": "USD per task for the marker on the final-score chart (default: the run's money budget, "
                          "else --money-max)."})
    price_as: str | None = field(default=None, metadata={
        "metavar": "PROVIDER:MODEL",
        "help": "Cost every run's token counts at this model's prices (e.g. google:gemini-2.5-pro), to "
                "compare runs of offline or self-hosted models in dollars."})
    prices: tuple[str, ...] = field(default=(), metadata={
        "metavar": "FILE", "help": "Extra price file(s) (TOML, the price-file format of docs/llm.md); later ones win."})
    title: str = field(default="pike-harness report", metadata={"help": "Title of the HTML report."})
    outlier_factor: float = field(default=5.0, metadata={
        "min": 0, "help": "Set aside an eager baseline more than this many times the fastest timing of the same task "
                          "by another seed of its configuration (0: keep every baseline, as PIKE's scoring does)."})
    compare: tuple[str, ...] | None = field(default=None, metadata={
        "nargs": 2, "metavar": "A B",
        "help": "Compare two configurations (a configuration's label, a prefix of its config key, or a run name or "
                "pattern of its runs): ratio of suite geomeans with a paired bootstrap 95% CI, and the tasks that "
                "favour each. Automatic when exactly two configurations are reported."})
    retime: bool = field(default=False, metadata={
        "help": "Re-time each task's final best paired against its eager reference (alternating blocks, by the "
                "evaluator that --evaluator, --device, --protocol and its own options describe); the report then "
                "uses those speedups with their 95% intervals, as it does the run's own final re-timing."})
    retime_halfwidth: float = field(default=0.02, metadata={
        "min": 0.001, "max": 0.5, "help": "With --retime: stop once the speedup's 95% interval is within +- this "
                                          "fraction."})
    retime_max_seconds: float = field(default=60.0, metadata={
        "min": 1, "help": "With --retime: at most this many seconds of timed blocks per task."})
    include_jit_trace: bool = field(default=False, metadata={
        "help": "Let attempts whose code contains torch.jit.trace be a task's best (PIKE's analysis ignores "
                "them, and so does the default)."})
    speed_of_light: bool = field(default=True, metadata={
        "help": "Count each reference's FLOPs and bytes and report every source's fraction of speed of light, "
                "where the device it was timed on has peak figures (docs/report.md)."})
    peaks: tuple[str, ...] = field(default=(), metadata={
        "metavar": "FILE", "help": "Extra peak table(s) (TOML, docs/report.md) for devices the datasheet table lacks."})
    profile_best: int = field(default=0, metadata={
        "min": 0, "metavar": "N", "help": "Profile each task's N fastest correct candidates under torch.profiler "
                                          "(by the evaluator --evaluator/--device describe) and show their kernels."})


def _run(row: dict[str, Any]) -> str:
    return f"{row.get('run')} ({row.get('status')})" if row.get("status") != "complete" else str(row.get("run"))


def _money(row: dict[str, Any]) -> str | None:
    """"?" when some calls had no known price; "-" when the run cost nothing (no money marker)."""
    if row.get("unknown_cost_calls"):
        return "?"
    return None if row.get("usd_per_task") else "-"


def _queries(row: dict[str, Any]) -> str | None:
    """Queries counted against the budget; a strategy's overshoot is shown, never scored."""
    if row.get("queries_done") is None:
        return None
    past = f"+{row['past_budget']}" if row.get("past_budget") else ""
    return f"{row.get('queries_done')}/{row.get('budget')}{past}"


COLUMNS = (
    Column("run", "run", text=_run),
    Column("n_with_baseline", "tasks", "int"),
    Column("queries_done", "queries", text=_queries),
    Column("score", "score", "ratio"),
    Column("score_raw", "raw", "ratio"),
    Column("n_solved", "solved", "int"),
    Column("fast_1", "fast_1", "percent"),
    Column("money_score", "@$", "ratio", text=_money),
    Column("usd_per_task", "$/task", "usd", text=_money),
    Column("abandoned_queries", "abandoned", text=lambda r: _abandoned(r), hide_when_empty=True),
    Column("efa_repaired", "EFA", text=lambda r: f"{r.get('efa_repaired') or 0}/{r.get('efa_failed') or 0}"),
    Column("n_retimed", "re-timed", "int", hide_when_empty=True),
    Column("search_score", "search", "ratio", hide_when_empty=True),
    Column("n_noisy", "noisy", text=lambda r: _noisy(r), hide_when_empty=True),
)
def _abandoned(row: dict[str, Any]) -> str:
    """Queries abandoned at a stop and the run's total estimated floor, apart from $/task: "2 >=$0.03",
    "+?" where some have no estimate, "?" where none has; empty (the column hides) when there are none."""
    count, usd = row.get("abandoned_queries"), row.get("abandoned_usd_estimated")
    if not count:
        return ""
    if usd is None:
        return f"{count} ?"
    return f"{count} >=${float(usd):.2f}" + ("+?" if row.get("abandoned_cost_unknown") else "")


def _noisy(row: dict[str, Any]) -> str | None:
    """Results flagged noisy: re-timed final bests whose paired timing is flagged, and search-time timings
    (attempts) that carry the noisy_timing flag; None (hidden) when there are none."""
    retimed, search = row.get("n_flagged_retimes") or 0, row.get("noisy_attempts") or 0
    return f"{retimed}+{search}" if retimed or search else ""


LEGEND = ("score: geomean speedup over eager (clamped) at the full budget, each task's paired re-timed speedup "
          "where there is one, else its search-time one; re-timed: tasks with a paired speedup; search: the score "
          "from search-time numbers only; noisy: flagged re-timings + flagged search-time timings; raw: unclamped; "
          "@$: score at the money budget; $/task: every LLM call paid, queries past the budget included; ?: some calls have no known price, so no money figures (add one with "
          "--prices or --price-as); abandoned (estimated, lower bound; shown when a run has any): LLM queries "
          "unanswered when the run stopped and their estimated cost (prompt only) for the whole run, never in "
          "$/task; EFA: failed lineages the error-fixing agent repaired")
