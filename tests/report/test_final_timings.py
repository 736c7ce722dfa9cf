"""The report's final speedups: each task's final best at its paired re-timed speedup (the run's
``final_timing`` events, matched by code hash) with its 95% interval, else visibly at its search-time
number; the count of results flagged noisy; and PIKE's final-best rule (torch.jit.trace code never
wins unless asked). Real DuckDB over hand-made run stores (handmade.py's scenario A, budget 4)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pytest
from pikeh_duckdb.metrics import MetricParams, create_metrics, rows

from pike_harness.host.store_db import materialize
from pike_harness.testing import invoke

from .handmade import HandRun, scenario_a

TRACED = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.jit.trace(f, x)\n"


def retimed_run(root: Path) -> Path:
    """Scenario A's tasks with final timings: hand/1's best (q4, 2.5 ms, 4x at search time) re-timed at
    3.5x [3.4, 3.6]; hand/2's evaluator could not pair; hand/5's timing names code that is no longer its
    best (a stale hash). One search-time timing of hand/3 is flagged noisy."""
    run = HandRun(root, "R")
    for task_id, name in ((1, "1_Alpha"), (2, "2_Beta"), (3, "3_Gamma"), (5, "5_Eps")):
        run.task(task_id, name)
    run.baseline(1, 10.0).attempt(1, 2, "correct", 5.0).attempt(1, 4, "correct", 2.5)
    run.baseline(2, 4.0).attempt(2, 3, "correct", 2.0)
    run.baseline(3, 6.0).attempt(3, 1, "correct", 12.0, noisy=True)
    run.baseline(5, 3.0).attempt(5, 4, "correct", 1.5)
    run.final_timing(1, 4, 3.5, (3.4, 3.6), flagged="interval wider than +-2% (max_seconds)", effective_pairs=2.5)
    run.final_timing(2, 3, None, why="the evaluator returned no paired timing (it cannot pair on this backend)")
    run.final_timing(5, 4, 9.0, (8.0, 10.0), code_sha256="0" * 64)
    return run.write()


def database(run_dirs: list[Path], **params: object) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    materialize(run_dirs, con)
    create_metrics(con, MetricParams(**params))
    return con


def test_the_headline_uses_paired_speedups_and_labels_the_rest_search_time(tmp_path):
    con = database([retimed_run(tmp_path)])
    final = {r["task"]: r for r in rows(con, "FROM task_final")}
    one = final["hand/1"]
    assert one["timing"] == "re-timed" and one["speedup_raw"] == pytest.approx(3.5)
    assert (one["ci_low"], one["ci_high"], one["n_pairs"], one["effective_pairs"]) == (3.4, 3.6, 5, 2.5)
    assert one["search_speedup_raw"] == pytest.approx(4.0) and one["paired_flagged"].startswith("interval wider")
    assert final["hand/2"]["timing"] == "search-time" and "cannot pair" in final["hand/2"]["paired_why"]
    assert final["hand/2"]["speedup_raw"] == pytest.approx(2.0)
    assert final["hand/5"]["timing"] == "search-time" and final["hand/5"]["speedup_raw"] == pytest.approx(2.0)
    [summary] = rows(con, "FROM run_summary")
    # clamped: hand/1 3.5, hand/2 2, hand/3 max(1, 0.5) = 1, hand/5 2
    assert summary["score"] == pytest.approx((3.5 * 2 * 1 * 2) ** 0.25)
    assert summary["score_raw"] == pytest.approx((3.5 * 2 * 0.5 * 2) ** 0.25)
    assert summary["search_score"] == pytest.approx((4 * 2 * 1 * 2) ** 0.25)  # the curve stays search-time
    assert summary["n_retimed"] == 1 and summary["n_flagged_retimes"] == 1 and summary["noisy_attempts"] == 1
    assert summary["n_noisy"] == 2


def test_a_run_without_final_timings_scores_as_before(tmp_path):
    con = database([scenario_a(tmp_path)])
    [summary] = rows(con, "FROM run_summary")
    assert summary["score"] == pytest.approx(2.0) and summary["search_score"] is None
    assert summary["n_retimed"] is None and summary["n_noisy"] is None
    assert {r["timing"] for r in rows(con, "FROM task_final WHERE best_ms IS NOT NULL")} == {"search-time"}


def test_torch_jit_trace_code_never_makes_the_best_unless_asked(tmp_path):
    run = HandRun(tmp_path, "J").task(1, "1_Alpha")
    run.baseline(1, 10.0).attempt(1, 2, "correct", 5.0).attempt(1, 4, "correct", 2.5, code=TRACED)
    path = run.write()
    pike = database([path])
    [final] = rows(pike, "FROM task_final")
    assert final["best_key"] == "q002" and final["speedup_raw"] == pytest.approx(2.0)
    assert rows(pike, "SELECT max(score) AS s FROM score_vs_queries")[0]["s"] == pytest.approx(2.0)
    ours = database([path], include_jit_trace=True)
    assert rows(ours, "FROM task_final")[0]["best_key"] == "q004"
    assert rows(ours, "FROM task_final")[0]["speedup_raw"] == pytest.approx(4.0)


def test_the_report_shows_intervals_and_the_flagged_count(tmp_path):
    run_dir = retimed_run(tmp_path / "runs")
    out = tmp_path / "report"
    result = invoke("report", "--input", str(run_dir), "--output", str(out), "--format", "csv,html", "--json")
    assert result.exit_code == 0, result.output[-3000:]
    summary = json.loads(result.output[result.output.index("["):])[0]
    assert summary["score"] == pytest.approx((3.5 * 2 * 1 * 2) ** 0.25) and summary["n_noisy"] == 2
    long = (out / "per_task_long.csv").read_text().splitlines()
    header = long[0].split(",")
    one = dict(zip(header, next(line for line in long if ",hand/1," in line).split(","), strict=True))
    assert one["timing"] == "re-timed" and (one["ci_low"], one["ci_high"]) == ("3.4", "3.6")
    assert (one["n_pairs"], one["effective_pairs"]) == ("5", "2.5")
    page = (out / "index.html").read_text()
    assert "1 re-timed, 1 search-time" in page  # flagged noisy, in the runs table
    assert "95% CI 3.40-3.60, flagged" in page and "search-time" in page  # under the per-task table's numbers
    assert "5 pairs (worth 2.5: neighbours correlated)" in page
    assert "95% interval 3.40x to 3.60x" in page and "not re-timed: the evaluator returned no paired" in page
    table = invoke("report", "--input", str(run_dir), "--output", str(out), "--format", "csv")
    assert "noisy" in table.output and "re-timed" in table.output and "1+1" in table.output
    assert not math.isnan(summary["search_score"])


def test_the_report_option_include_jit_trace(tmp_path):
    run = HandRun(tmp_path / "runs", "J").task(1, "1_Alpha")
    run.baseline(1, 10.0).attempt(1, 2, "correct", 5.0).attempt(1, 4, "correct", 2.5, code=TRACED)
    path = run.write()

    def score(*extra: str) -> float:
        result = invoke("report", "--input", str(path), "--output", str(tmp_path / "report"), "--format", "csv",
                        "--json", *extra)
        assert result.exit_code == 0, result.output[-3000:]
        return json.loads(result.output[result.output.index("["):])[0]["score"]

    assert score() == pytest.approx(2.0) and score("--include-jit-trace") == pytest.approx(4.0)


def test_a_foreign_journal_s_long_why_is_escaped_and_cut_in_the_report(tmp_path):
    """A run directory from elsewhere can say anything in a final timing's ``why``: the CSV and the page show
    it on one screen line, its control characters escaped."""
    run = HandRun(tmp_path / "runs", "F").task(2, "2_Beta")
    run.baseline(2, 4.0).attempt(2, 3, "correct", 2.0)
    run.final_timing(2, 3, None, why="cannot pair \x1b[2J\x1b]0;owned\x07 " + "W" * 20_000)
    out = tmp_path / "report"
    result = invoke("report", "--input", str(run.write()), "--output", str(out), "--format", "csv,html")
    assert result.exit_code == 0, result.output[-3000:]
    for path in (out / "per_task_long.csv", out / "index.html"):
        text = path.read_text()
        assert "cannot pair \\x1b[2J" in text and "W" * 301 not in text and "\x1b" not in text, path
    assert "W" * 301 not in result.output
