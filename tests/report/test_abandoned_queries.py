"""Queries abandoned at a stop (``llm_abandoned`` events) in the report: their estimated cost is a figure
of its own, "abandoned (estimated, lower bound)", per task and per run; it never enters the measured spend,
the query or attempt counts, or the curves.

Three hand-made runs of budget 4, journaled through ``RunStore`` as the run loop journals them:
``stopped`` was interrupted with hand/1's q002 and hand/2's q002 unanswered (two ``llm_abandoned``
events, estimates $0.0125 and $0.02), then resumed, asking hand/1's q002 again (a later ``llm`` event,
billed apart); ``clean`` is its twin without the stop; ``unpriced`` abandoned one query of an unpriced
model (no estimate) and was resumed likewise.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pytest
from pikeh_duckdb.html import COST_NOTE, NOTES
from pikeh_duckdb.metrics import MetricParams, create_metrics, rows
from pikeh_duckdb.reporter import abandoned_notes, price_rows

from pike_harness.contracts.journal import LLMAbandoned
from pike_harness.host.store import read_journal
from pike_harness.host.store_db import materialize
from pike_harness.testing import invoke

from .handmade import HandRun

SUMMARY_HEADER = (Path(__file__).parents[2] / "docs" / "examples" / "report" / "summary.csv").read_text().splitlines()[0]


def _abandoned(run: HandRun, task_id: int, key: str, usd: float | None) -> None:
    run.events.append(LLMAbandoned(task=run.ref(task_id), key=key, role="optimize", request_sha256="ab" * 32,
                                   estimated_prompt_tokens=10_000, estimated_cost_usd=usd,
                                   why="the run stopped before its answer came").to_dict())


def _run(root: Path, name: str, *, stop: dict[tuple[int, str], float | None]) -> Path:
    """hand/1: brainstorm, q001 correct (5 ms), q002 (correct, 2 ms; asked again after the stop when it was
    abandoned); hand/2: brainstorm, q001 correct (2 ms), q002 (only ever abandoned in ``stopped``)."""
    run = HandRun(root, name).task(1, "1_Alpha").task(2, "2_Beta")
    run.brainstorm(1).baseline(1, 10.0).attempt(1, 1, "correct", 5.0)
    run.brainstorm(2).baseline(2, 4.0).attempt(2, 1, "correct", 2.0)
    if stop:
        for (task_id, key), usd in stop.items():
            _abandoned(run, task_id, key, usd)
        run.events.append({"type": "run_end", "status": "interrupted", "why": "a second Ctrl-C"})
        run.events.append({"type": "run_start", "pid": 2, "resume": 1, "environment": {}})
    run.attempt(1, 2, "correct", 2.0)  # asked again: a second, separately billed request
    return run.write()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("abandoned")
    return {"stopped": _run(root, "stopped", stop={(1, "q002"): 0.0125, (2, "q002"): 0.02}),
            "clean": _run(root, "clean", stop={}),
            "unpriced": _run(root, "unpriced", stop={(1, "q002"): None})}


def _database(run_dirs: list[Path]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    materialize(run_dirs, con)
    create_metrics(con, MetricParams(), price_rows(con, None, ()))
    return con


def test_the_journal_holds_the_abandoned_queries_and_the_re_asked_one(runs):
    events = read_journal(runs["stopped"] / "journal.jsonl")
    kinds = [(e["type"], e.get("task"), e.get("key")) for e in events if e["type"] in ("llm", "llm_abandoned")]
    assert kinds.index(("llm_abandoned", "hand/1", "q002")) < kinds.index(("llm", "hand/1", "q002"))
    assert ("llm", "hand/2", "q002") not in kinds


def test_abandoned_cost_is_apart_from_spend_queries_attempts_and_curves(runs):
    con = _database(list(runs.values()))
    loaded = rows(con, "SELECT run, task, key, estimated_cost_usd FROM llm_abandoned ORDER BY run, task")
    assert [(r["run"], r["task"], r["key"]) for r in loaded] == [
        ("stopped", "hand/1", "q002"), ("stopped", "hand/2", "q002"), ("unpriced", "hand/1", "q002")]
    final = {(r["run"], r["task"]): r for r in rows(con, "FROM task_final")}
    abandoned = {(r["run"], r["task"]): r for r in rows(con, "FROM task_abandoned")}
    summary = {r["run"]: r for r in rows(con, "FROM run_summary")}
    costs = {r["run"]: r for r in rows(con, "FROM run_costs")}

    # The measured figures are the twin's: the abandoned requests are neither spend nor queries nor attempts.
    for task in ("hand/1", "hand/2"):
        for column in ("spend_usd", "spend_in_budget_usd", "queries", "n_attempts", "n_correct", "speedup",
                       "best_idx", "cost_known"):
            assert final[("stopped", task)][column] == final[("clean", task)][column], (task, column)
    assert final[("stopped", "hand/1")]["spend_usd"] == pytest.approx(0.03 + 2 * 0.15)  # the re-asked call once
    for column in ("calls", "unknown_cost_calls", "spend_usd", "spend_in_budget_usd", "calls_past_budget"):
        assert costs["stopped"][column] == costs["clean"][column], column
    for column in ("usd_per_task", "unknown_cost_calls", "score", "money_score", "queries_done", "attempts",
                   "correct", "n_solved"):
        assert summary["stopped"][column] == summary["clean"][column], column
    for view, key in (("score_vs_queries", "queries"), ("score_vs_money", "usd"), ("fast_p", "p")):
        curves = {run: [tuple(r.values())[1:] for r in rows(con, f"FROM {view} WHERE run = ? ORDER BY {key}", [run])]
                  for run in ("stopped", "clean")}
        assert curves["stopped"] and curves["stopped"] == curves["clean"], view

    # The separate figure: the sum of the estimates, per task and per run.
    assert set(abandoned) == {("stopped", "hand/1"), ("stopped", "hand/2"), ("unpriced", "hand/1")}
    assert (abandoned[("stopped", "hand/1")]["abandoned_queries"], abandoned[("stopped", "hand/2")]["abandoned_queries"]) == (1, 1)
    assert abandoned[("stopped", "hand/1")]["abandoned_usd_estimated"] == pytest.approx(0.0125)
    assert abandoned[("stopped", "hand/2")]["abandoned_usd_estimated"] == pytest.approx(0.02)
    assert summary["stopped"]["abandoned_queries"] == 2
    assert summary["stopped"]["abandoned_usd_estimated"] == pytest.approx(0.0325)
    assert summary["stopped"]["abandoned_cost_unknown"] is None
    assert summary["clean"]["abandoned_queries"] is None  # none: the terminal column hides
    # No estimate (an unpriced model): unknown, never $0.
    assert summary["unpriced"]["abandoned_queries"] == 1 and summary["unpriced"]["abandoned_cost_unknown"] == 1
    assert summary["unpriced"]["abandoned_usd_estimated"] is None
    assert abandoned[("unpriced", "hand/1")]["abandoned_usd_estimated"] is None
    assert abandoned[("unpriced", "hand/1")]["abandoned_cost_unknown"] == 1
    assert final[("unpriced", "hand/1")]["spend_usd"] == final[("clean", "hand/1")]["spend_usd"]

def test_report_files_and_table_show_the_abandoned_figure_apart(runs, tmp_path):
    out = tmp_path / "report"
    result = invoke("report", "--input", str(runs["stopped"].parent), "--output", str(out), "--format", "csv")
    assert result.exit_code == 0, result.output[-3000:]
    assert "abandoned" in result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "2 >=$0.03" in lines["stopped"] and "1 ?" in lines["unpriced"]
    assert "abandoned (estimated, lower bound" in " ".join(result.output.split())  # the legend

    assert (out / "summary.csv").read_text().splitlines()[0] == SUMMARY_HEADER  # unchanged header
    with (out / "per_task_long.csv").open() as handle:
        long = {(r["run"], r["task"]): r for r in csv.DictReader(handle)}
    assert float(long[("stopped", "hand/1")]["abandoned_usd_estimated"]) == pytest.approx(0.0125)
    assert long[("stopped", "hand/2")]["abandoned_queries"] == "1"
    assert long[("clean", "hand/1")]["abandoned_queries"] == "0"
    assert long[("unpriced", "hand/1")]["abandoned_usd_estimated"] == ""  # unknown
    assert long[("unpriced", "hand/1")]["abandoned_cost_unknown"] == "1"
    assert long[("stopped", "hand/1")]["spend_usd"] == long[("clean", "hand/1")]["spend_usd"]

    only_clean = invoke("report", "--input", str(runs["clean"]), "--output", str(tmp_path / "clean"),
                        "--format", "csv", "--json")
    assert only_clean.exit_code == 0, only_clean.output[-3000:]
    summary = json.loads(only_clean.output[only_clean.output.index("["):only_clean.output.rindex("]") + 1])[0]
    assert summary["abandoned_queries"] is None


def test_the_page_notes_the_abandoned_figure_only_where_there_is_one(runs):
    assert NOTES[COST_NOTE].startswith("Cost per task")
    con = _database(list(runs.values()))
    summary = rows(con, "FROM run_summary")
    [note] = abandoned_notes(summary)
    assert note.startswith("Abandoned (estimated, lower bound)")
    assert "stopped: 2 queries, at least $0.03" in note and "unpriced: 1 query, cost unknown" in note
    assert "clean" not in note
    assert abandoned_notes([r for r in summary if r["run"] == "clean"]) == []
