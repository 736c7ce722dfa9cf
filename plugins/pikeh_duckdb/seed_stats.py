"""Configurations (runs that differ only in their seed) with bootstrap 95% intervals, and paired comparisons.

Runs are grouped by ``config_key`` (store_db: the hash of run.json's configuration without the seed).
For each configuration this module reads the per-task clamped speedups that the metric views compute
(``task_speedup_at_query``, ``task_speedup_at_money``), arranges them as (curve point, task, seed)
arrays and hands them to bootstrap.py. Results are written back into ``report.duckdb`` as tables
(``config_scores``, ``config_score_vs_queries``, ``config_score_vs_money``, ``config_comparison``), so
they can be queried like every metric.

Scope, per configuration: the tasks with an eager baseline in at least one of its runs (a seed without
a baseline for a task leaves that cell empty); the queries curve runs to the fewest queries any of its
seeds has done (a seed still running caps it); the money curve exists when every seed's costs are known
and non-zero, and a seed whose spending stopped below a point keeps its last value there.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pike_harness.api import UserError

from . import bootstrap
from .metrics import rows

# A seed's part of a default run name: `_s<seed>` (a seed group's runs), and a flat default name's hash.
SEED_PART = re.compile(r"_s\d+(_[0-9a-f]{8})?$")


@dataclass
class Configuration:
    key: str
    label: str
    runs: list[str]
    seeds: list[int | None]
    strategy: str | None = None
    llm: str | None = None
    tasks: list[str] = field(default_factory=list)


def configurations(con: Any) -> list[Configuration]:
    """The reported runs grouped by configuration, labelled for people (ordered by label)."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in rows(con, "SELECT run, config_key, seed, strategy, llm FROM report_runs ORDER BY seed, run"):
        grouped[run["config_key"]].append(run)
    out = []
    for key, members in grouped.items():
        stems = {SEED_PART.sub("", r["run"]) for r in members}
        label = stems.pop() if len(stems) == 1 else f"{members[0]['strategy']} {members[0]['llm']} [{key[:8]}]"
        out.append(Configuration(key, label, [r["run"] for r in members], [r["seed"] for r in members],
                                 members[0]["strategy"], members[0]["llm"]))
    labels = [c.label for c in out]
    for config in out:  # two configurations with one label (same stem, other options): add the key
        if labels.count(config.label) > 1:
            config.label = f"{config.label} [{config.key[:8]}]"
    return sorted(out, key=lambda c: c.label)


def _cells(config: Configuration, values: dict[tuple[str, str], dict[Any, float]], points: Sequence[Any],
           carry: bool) -> np.ndarray:
    """(points, tasks, seeds) log speedups; NaN where a seed has no value for a task."""
    out = np.full((len(points), len(config.tasks), len(config.runs)), np.nan)
    for s, run in enumerate(config.runs):
        for t, task in enumerate(config.tasks):
            series = values.get((run, task))
            if not series:
                continue
            last = None
            for p, point in enumerate(points):
                value = series.get(point, last if carry else None)
                if value is not None:
                    out[p, t, s] = math.log(value)
                    last = value
    return out


def _tasks(config: Configuration, values: dict[tuple[str, str], dict[Any, float]]) -> list[str]:
    return sorted({task for (run, task) in values if run in config.runs})


def analyse(con: Any, compare: Sequence[str] | None = None, replicates: int = bootstrap.REPLICATES) -> dict[str, Any]:
    """Every configuration's curves and final score with intervals, and the comparison (``compare``:
    two names; automatic when exactly two configurations are reported). Writes the tables too."""
    configs = configurations(con)
    by_query: dict[tuple[str, str], dict[Any, float]] = defaultdict(dict)
    for r in rows(con, "SELECT run, task, b, speedup FROM task_speedup_at_query WHERE baseline_ms IS NOT NULL"):
        by_query[(r["run"], r["task"])][r["b"]] = r["speedup"]
    done = {r["run"]: r["queries_done"] for r in rows(con, "SELECT run, queries_done FROM report_runs")}
    paid = {r["run"] for r in rows(con, "SELECT run FROM run_summary WHERE coalesce(unknown_cost_calls, 0) = 0 "
                                        "AND usd_per_task > 0")}
    by_money: dict[tuple[str, str], dict[Any, float]] = defaultdict(dict)
    marker: dict[tuple[str, str], dict[Any, float]] = defaultdict(dict)
    for r in rows(con, "SELECT run, task, usd, marker, speedup FROM task_speedup_at_money "
                       "WHERE baseline_ms IS NOT NULL"):
        (marker if r["marker"] else by_money)[(r["run"], r["task"])][round(r["usd"], 6)] = r["speedup"]
    summary, curves, money_curves, logs_final = [], [], [], {}
    for config in configs:
        config.tasks = _tasks(config, by_query)
        if not config.tasks:
            continue
        last = min(done.get(run) or 0 for run in config.runs)
        points = list(range(1, last + 1))
        if not points:
            continue
        cells = _cells(config, by_query, points, carry=False)
        keep = ~np.all(np.isnan(cells[0]), axis=1)  # tasks some seed has a value for
        cells, config.tasks = cells[:, keep], [t for t, k in zip(config.tasks, keep, strict=True) if k]
        intervals = bootstrap.log_mean_intervals(cells, replicates=replicates)
        curves += [{"config_key": config.key, "label": config.label, "queries": b, "score": i.estimate,
                    "ci_low": i.low, "ci_high": i.high} for b, i in zip(points, intervals, strict=True)]
        logs_final[config.key] = cells[-1]
        final = intervals[-1]
        row = {"config_key": config.key, "label": config.label, "strategy": config.strategy, "llm": config.llm,
               "runs": config.runs, "seeds": config.seeds, "n_runs": len(config.runs), "n_tasks": len(config.tasks),
               "queries": last, "score": final.estimate, "ci_low": final.low, "ci_high": final.high,
               "seed_scores": [_seed_score(cells[-1][:, s]) for s in range(len(config.runs))],
               "money_score": None, "money_low": None, "money_high": None}
        if all(run in paid for run in config.runs):
            grid = sorted({u for (run, _), series in by_money.items() if run in config.runs for u in series})
            if grid:
                money = bootstrap.log_mean_intervals(_cells(config, by_money, grid, carry=True), replicates=replicates)
                money_curves += [{"config_key": config.key, "label": config.label, "usd": u, "score": i.estimate,
                                  "ci_low": i.low, "ci_high": i.high} for u, i in zip(grid, money, strict=True)]
            marks = sorted({u for (run, _), series in marker.items() if run in config.runs for u in series})
            if len(marks) == 1:  # one money budget for every seed: the score there, with its interval
                (at,) = bootstrap.log_mean_intervals(_cells(config, marker, marks, carry=False), replicates=replicates)
                row.update(money_budget=marks[0], money_score=at.estimate, money_low=at.low, money_high=at.high)
        summary.append(row)
    reported = [c for c in configs if c.key in logs_final]
    comparison = None
    pair = pick_pair(reported, compare)
    if pair is not None:
        comparison = compare_pair(pair, logs_final, replicates)
    _store(con, summary, curves, money_curves, comparison)
    return {"configs": summary, "config_queries": curves, "config_money": money_curves,
            "comparison": [comparison] if comparison else []}


def _seed_score(logs: np.ndarray) -> float | None:
    """One seed's suite score over the tasks it has a value for (None when it has none)."""
    present = logs[~np.isnan(logs)]
    return float(np.exp(present.mean())) if present.size else None


def pick_pair(configs: Sequence[Configuration], names: Sequence[str] | None) -> tuple[Configuration, Configuration] | None:
    """The two configurations ``--compare A B`` names (a label, a config key prefix, or a run name or
    pattern of their runs); without names, the two there are when there are exactly two."""
    if not names:
        return (configs[0], configs[1]) if len(configs) == 2 else None
    if len(names) != 2:
        raise UserError("--compare takes two configurations: --compare A B")
    found = []
    for name in names:
        # In this order: a label, a run name or pattern, a config key prefix (4 characters at least).
        hits = ([c for c in configs if name == c.label]
                or [c for c in configs if any(fnmatch.fnmatchcase(run, name) for run in c.runs)]
                or [c for c in configs if len(name) >= 4 and c.key.startswith(name)])
        if len(hits) != 1:
            known = "; ".join(f"{c.label} ({', '.join(c.runs)})" for c in configs) or "none with a baseline"
            what = "matches no configuration" if not hits else f"matches {len(hits)} configurations"
            raise UserError(f"--compare {name!r} {what} (configurations: {known})")
        found.append(hits[0])
    if found[0].key == found[1].key:
        raise UserError(f"--compare: {names[0]!r} and {names[1]!r} are the same configuration")
    return found[0], found[1]


def compare_pair(pair: tuple[Configuration, Configuration], logs: dict[str, np.ndarray],
                 replicates: int) -> dict[str, Any]:
    """A against B on the tasks both have (each task's row of per-seed log speedups at the full budget)."""
    a, b = pair
    common = [t for t in a.tasks if t in b.tasks]
    if not common:
        raise UserError(f"--compare: {a.label} and {b.label} share no task with a baseline")
    la = logs[a.key][[a.tasks.index(t) for t in common]]
    lb = logs[b.key][[b.tasks.index(t) for t in common]]
    result = bootstrap.compare(la, lb, replicates=replicates)
    return {"a": a.label, "b": b.label, "a_key": a.key, "b_key": b.key, "n_tasks": result.n_tasks,
            "a_runs": len(a.runs), "b_runs": len(b.runs),
            "ratio": result.ratio.estimate, "ratio_low": result.ratio.low, "ratio_high": result.ratio.high,
            "difference": result.difference.estimate, "difference_low": result.difference.low,
            "difference_high": result.difference.high,
            "favour_a": result.favour_a, "favour_b": result.favour_b, "ties": result.ties}


TABLES = {
    "config_scores": ("config_key VARCHAR, label VARCHAR, strategy VARCHAR, llm VARCHAR, runs VARCHAR[], "
                      "seeds INTEGER[], n_runs INTEGER, n_tasks INTEGER, queries INTEGER, score DOUBLE, "
                      "ci_low DOUBLE, ci_high DOUBLE, seed_scores DOUBLE[], money_score DOUBLE, money_low DOUBLE, "
                      "money_high DOUBLE", "configs"),
    "config_score_vs_queries": ("config_key VARCHAR, label VARCHAR, queries INTEGER, score DOUBLE, ci_low DOUBLE, "
                                "ci_high DOUBLE", "queries"),
    "config_score_vs_money": ("config_key VARCHAR, label VARCHAR, usd DOUBLE, score DOUBLE, ci_low DOUBLE, "
                              "ci_high DOUBLE", "money"),
    "config_comparison": ("a VARCHAR, b VARCHAR, a_key VARCHAR, b_key VARCHAR, n_tasks INTEGER, a_runs INTEGER, "
                          "b_runs INTEGER, ratio DOUBLE, ratio_low DOUBLE, ratio_high DOUBLE, difference DOUBLE, "
                          "difference_low DOUBLE, difference_high DOUBLE, favour_a INTEGER, favour_b INTEGER, "
                          "ties INTEGER", "comparison"),
}


def _store(con: Any, summary: list[dict[str, Any]], curves: list[dict[str, Any]], money: list[dict[str, Any]],
           comparison: dict[str, Any] | None) -> None:
    data = {"configs": summary, "queries": curves, "money": money, "comparison": [comparison] if comparison else []}
    for table, (columns, source) in TABLES.items():
        con.execute(f"CREATE OR REPLACE TABLE {table} ({columns})")
        names = [c.strip().split()[0] for c in columns.split(",")]
        if data[source]:
            con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(names))})",
                            [[r.get(n) for n in names] for r in data[source]])


def describe(summary: Sequence[dict[str, Any]], comparison: Sequence[dict[str, Any]]) -> list[str]:
    """The configurations' scores with their intervals and the comparison, one line each (for the terminal)."""
    lines = [f"{c['label']}: {c['score']:.3f}x (95% CI {c['ci_low']:.3f}-{c['ci_high']:.3f}) over {c['n_runs']} "
             f"seed(s), {c['n_tasks']} task(s), {c['queries']} queries" for c in summary]
    for p in comparison:
        lines.append(f"{p['a']} vs {p['b']}: score ratio {p['ratio']:.3f}x (95% CI {p['ratio_low']:.3f}-"
                     f"{p['ratio_high']:.3f}) on {p['n_tasks']} task(s); tasks favouring {p['a']}: {p['favour_a']}, "
                     f"{p['b']}: {p['favour_b']}, ties: {p['ties']}")
    return lines
