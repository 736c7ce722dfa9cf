"""Eager baselines that disagree wildly with their own seed group: said on the terminal and in the page.

One disturbed baseline (another tenant, a cold cache) turns into a huge task speedup and then into the
headline, so the report must say which baselines it set aside and why. The rule itself is SQL, the
``baseline_outliers`` view of metrics.py (more than ``--outlier-factor`` times the fastest timing of the
same task by another seed of the configuration); this module only words it.
"""

from __future__ import annotations

from typing import Any

from .metrics import rows


def flagged(con: Any) -> list[dict[str, Any]]:
    """One row per set-aside baseline: run, task, its timing, the group's fastest and the seed that timed it."""
    return rows(con, "SELECT run, task, baseline_ms, group_ms, ratio, group_run, factor FROM baseline_outliers "
                     "ORDER BY run, task")


def warnings(flags: list[dict[str, Any]]) -> list[str]:
    """One line per set-aside baseline."""
    return [f"run {f['run']}: {f['task']}'s eager baseline ({f['baseline_ms']:.4g} ms) is {f['ratio']:.1f}x "
            f"the same task's in seed {f['group_run']} ({f['group_ms']:.4g} ms): kept out of the scores and the "
            "headline until re-timed (its final best timed paired against the reference, by the run or "
            "`pikeh report --retime`)" for f in flags]


def section(flags: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not flags:
        return None
    return {"id": "baseline-outliers", "title": "Baselines set aside",
            "note": f"Eager baselines more than {flags[0]['factor']:g}x the fastest timing of the same task by another "
                    "seed of the same configuration on the same hardware. Timing noise only slows a timing, so "
                    "such a baseline was disturbed; the task has no baseline in that run and is left out of its "
                    "scores, the headline and the confidence bands until its final best is re-timed paired against "
                    "the reference (by the run, or `pikeh report --retime`), which needs no baseline of the run; "
                    "`--outlier-factor 0` "
                    "keeps every baseline, as PIKE's scoring does.",
            "columns": ["run", "task", "baseline ms", "seed group's fastest ms", "ratio"],
            "rows": [[f["run"], f["task"], f"{f['baseline_ms']:.4g}", f"{f['group_ms']:.4g} ({f['group_run']})",
                      f"{f['ratio']:.1f}x"] for f in flags]}
