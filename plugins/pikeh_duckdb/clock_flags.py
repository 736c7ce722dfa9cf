"""Attempts timed at other GPU clocks than their baseline: a speedup that partly measures the clocks.

Every GPU evaluation records the SM and memory clocks before and after its timed loop (``gpu_clocks``
in the result's environment; the ``clocks`` column of attempts and baselines). An attempt is flagged
when the mean of its readings differs from its task's eager baseline's (the run's own, else a baseline
set's on the same hardware) by more than 5% (``pike_harness.worker.supervise.gpu_clocks.drift``).
Runs on a CPU or without NVML have no readings and are never flagged.
"""

from __future__ import annotations

from typing import Any

from pike_harness.api import clock_drift as drift

from .metrics import json_object, rows

THRESHOLD = 0.05


def flagged(con: Any, threshold: float = THRESHOLD) -> list[dict[str, Any]]:
    """One row per correct attempt whose clocks drifted from its baseline's: run, task, key, what moved."""
    baselines: dict[tuple[str, str], dict[str, Any]] = {}
    by_hardware: dict[tuple[str | None, str], dict[str, Any]] = {}
    for row in rows(con, "SELECT run, baseline_set, task, hardware, clocks FROM baselines "
                         "WHERE mode = 'eager' AND clocks IS NOT NULL ORDER BY time"):
        clocks = json_object(row["clocks"])
        if row["run"] is not None:
            baselines[(row["run"], row["task"])] = clocks
        by_hardware[(row["hardware"], row["task"])] = clocks
    out = []
    for row in rows(con, "SELECT run, task, key, idx, hardware, clocks FROM attempts "
                         "WHERE category = 'correct' AND clocks IS NOT NULL ORDER BY run, task, idx"):
        base = baselines.get((row["run"], row["task"])) or by_hardware.get((row["hardware"], row["task"]))
        moved = drift(json_object(row["clocks"]), base, threshold)
        if moved:
            out.append({"run": row["run"], "task": row["task"], "key": row["key"], "idx": row["idx"],
                        "drift": "; ".join(moved)})
    return out


def warnings(flags: list[dict[str, Any]]) -> list[str]:
    """One warning line per run with flagged attempts."""
    per_run: dict[str, int] = {}
    for flag in flags:
        per_run[flag["run"]] = per_run.get(flag["run"], 0) + 1
    return [f"run {run}: {n} correct attempt(s) were timed at GPU clocks more than {THRESHOLD:.0%} away from their "
            "baseline's (section 'GPU clocks' lists them)" for run, n in sorted(per_run.items())]


def section(flags: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not flags:
        return None
    return {"id": "gpu-clocks", "title": "GPU clocks",
            "note": f"Correct attempts whose SM or memory clock (mean of the readings before and after timing) "
                    f"differs from their task's eager baseline's by more than {THRESHOLD:.0%}: their speedups "
                    "partly measure the clocks (throttling, power caps, another tenant).",
            "columns": ["run", "task", "attempt", "clocks"],
            "rows": [[f["run"], f["task"], f["key"], f["drift"]] for f in flags]}
