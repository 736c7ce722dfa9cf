"""Metrics computed in DuckDB from hand-made run stores, against values worked out by hand.

Scenario A (tests/report/handmade.py), budget 4, clamped speedups per task by query budget b:

    task    baseline  correct attempts (query: ms)            b=1   b=2   b=3   b=4
    hand/1  10 ms     q2: 5, q3: 8, q4: 2.5 (q5: 1, cut)      1     2     2     4
    hand/2   4 ms     q1: 8 (raw 0.5), q3 (fix of q2): 2      1     1     2     2
    hand/3   6 ms     none                                    1     1     1     1
    hand/4   failed   q1: 1   -> no baseline, left out
    hand/5   3 ms     q3 (fix of fix of q1): 3, q4: 1.5       1     1     1     2

    geomean (clamped)  b=1: 1          b=2: 2^(1/4)         b=3: 4^(1/4)        b=4: 16^(1/4) = 2
    geomean (raw; no correct attempt counts 1.0)
                       b=1: 0.5^(1/4)  b=2: (2*0.5)^(1/4)=1 b=3: 4^(1/4)        b=4: 2
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import duckdb
import pytest
from pikeh_duckdb.metrics import VIEWS, MetricParams, create_metrics, materialize_views, rows
from pikeh_duckdb.reporter import price_rows

from pike_harness.contracts.llm import Usage
from pike_harness.host import store_db
from pike_harness.host.pricing import PriceTable
from pike_harness.host.store_db import materialize

from .handmade import HandRun, scenario_a, write_baseline_set


def database(run_dirs: list[Path], baseline_dirs: list[Path] = (), *, price_as: str | None = None,
             **params: object) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    materialize(run_dirs, con, baseline_dirs=baseline_dirs)
    create_metrics(con, MetricParams(**params), price_rows(con, price_as, ()))
    return con


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scenario_a(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def con_a(run_a: Path) -> duckdb.DuckDBPyConnection:
    """Scenario A's metrics; the tests only read it, so one database serves the module."""
    return database([run_a])


def curve(con: duckdb.DuckDBPyConnection, column: str = "score") -> dict[int, float]:
    return {r["queries"]: r[column] for r in rows(con, "FROM score_vs_queries WHERE run = 'A'")}


def test_suite_score_by_query_budget_clamped_and_raw(con_a):
    assert curve(con_a) == pytest.approx({1: 1.0, 2: 2 ** 0.25, 3: 4 ** 0.25, 4: 2.0})
    assert curve(con_a, "score_raw") == pytest.approx({1: 0.5 ** 0.25, 2: 1.0, 3: 4 ** 0.25, 4: 2.0})
    solved = {r["queries"]: (r["n_solved"], r["n_tasks"]) for r in rows(con_a, "FROM score_vs_queries")}
    assert solved == {1: (1, 4), 2: (2, 4), 3: (3, 4), 4: (3, 4)}  # hand/4 has no baseline: never counted


def test_per_task_final_speedups_and_truncation(con_a):
    final = {r["task"]: r for r in rows(con_a, "FROM task_final")}
    # hand/1: q5 (1 ms, 10x) is past the budget of 4 and must not count.
    assert final["hand/1"]["best_ms"] == 2.5 and final["hand/1"]["best_idx"] == 4
    assert final["hand/1"]["speedup"] == pytest.approx(4.0)
    assert final["hand/1"]["n_attempts"] == 4 and final["hand/1"]["n_correct"] == 3
    assert final["hand/2"]["speedup_raw"] == pytest.approx(2.0) and final["hand/2"]["best_key"] == "q003"
    assert final["hand/3"]["speedup_raw"] is None and final["hand/3"]["speedup"] == 1.0
    assert final["hand/4"]["baseline_ms"] is None and final["hand/4"]["speedup"] is None
    # A larger --budget lets q5 in: hand/1 becomes 10x, the suite (10*2*1*2)^(1/4).
    wide = database([_run_dir(con_a)], budget=5)
    assert {r["task"]: r["speedup"] for r in rows(wide, "FROM task_final")}["hand/1"] == pytest.approx(10.0)
    assert curve(wide)[5] == pytest.approx(40 ** 0.25)
    narrow = database([_run_dir(con_a)], budget=2)
    assert max(curve(narrow)) == 2 and curve(narrow)[2] == pytest.approx(2 ** 0.25)


def _run_dir(con: duckdb.DuckDBPyConnection) -> Path:
    return Path(con.execute("SELECT path FROM runs").fetchone()[0])


def test_fast_p(con_a):
    fast = {round(r["p"], 2): r["fast_p"] for r in rows(con_a, "FROM fast_p")}
    # Raw best speedups of the four tasks with a baseline: 4, 2, none, 2.
    assert fast[0.0] == pytest.approx(0.75)  # fast_0 = correct at all
    assert fast[1.0] == pytest.approx(0.75)
    assert fast[1.95] == pytest.approx(0.75)
    assert fast[2.0] == pytest.approx(0.25)  # strictly greater than p
    assert fast[3.95] == pytest.approx(0.25)
    assert fast[4.0] == 0.0


def test_money_curve_resamples_spend_in_query_order(con_a):
    # Every counted call: 40k prompt + 10k output tokens at $1.25/$10 per M = $0.05 + $0.10 = $0.15; the
    # brainstorm call (8k + 2k) = $0.03 comes first. Cumulative per task: q1 0.18, q2 0.33, q3 0.48, q4 0.63.
    final = {r["task"]: r for r in rows(con_a, "FROM task_final")}
    # q5 is past the query budget: paid (spend_usd), but not charged to the curve (spend_in_budget_usd)
    assert final["hand/1"]["spend_usd"] == pytest.approx(0.78)
    assert final["hand/1"]["spend_in_budget_usd"] == pytest.approx(0.63)
    assert final["hand/3"]["spend_usd"] == pytest.approx(0.48)  # q2 failed (LLM error): no tokens, no cost
    assert final["hand/3"]["spend_in_budget_usd"] == pytest.approx(0.48)
    money = {round(r["usd"], 2): r["score"] for r in rows(con_a, "FROM score_vs_money")}
    assert money == pytest.approx({0.2: 1.0, 0.4: 2 ** 0.25, 0.6: 4 ** 0.25, 0.8: 2.0})  # stops at the first point past $0.63
    fine = database([_run_dir(con_a)], money_step=0.05, money_max=0.5)
    fine_curve = {round(r["usd"], 2): r["score"] for r in rows(fine, "FROM score_vs_money")}
    assert fine_curve[0.15] == 1.0  # only brainstorming fits
    assert fine_curve[0.35] == pytest.approx(2 ** 0.25)  # q1, q2 fit (0.33)
    assert fine_curve[0.45] == pytest.approx(2 ** 0.25)  # q3 needs 0.48
    assert fine_curve[0.5] == pytest.approx(4 ** 0.25)
    assert max(fine_curve) == 0.5  # capped by money_max


def test_money_marker_and_price_as(con_a, run_a):
    summary = rows(con_a, "FROM run_summary")[0]
    assert summary["money_marker"] == 25.0 and summary["money_score"] == pytest.approx(2.0)
    assert summary["usd_per_task"] == pytest.approx((0.78 + 0.63 + 0.48 + 0.18 + 0.63) / 5)  # hand/1's q5 paid too
    at_40c = database([run_a], money_budget=0.4)
    assert rows(at_40c, "FROM run_summary")[0]["money_score"] == pytest.approx(2 ** 0.25)
    # Priced as Gemini 2.5 Flash ($0.30 / $2.50): a counted call costs 0.012 + 0.025 = $0.037.
    flash = database([run_a], price_as="google:gemini-2.5-flash")
    spend = {r["task"]: r["spend_usd"] for r in rows(flash, "FROM task_final")}
    assert spend["hand/1"] == pytest.approx(0.0024 + 0.005 + 5 * 0.037)  # q5 past the budget included


def test_sql_costs_match_the_price_table(tmp_path):
    """The SQL costing (tiers, cached tokens) agrees with pike_harness.host.pricing call by call."""
    cases = [("google", "gemini-2.5-pro", 250_000, 10_000, None),  # long-context tier: $2.50 / $15
             ("google", "gemini-2.5-pro", 1_000, 500, None),
             ("openai", "gpt-5", 100_000, 20_000, 60_000),  # cached prompt tokens at $0.125
             ("anthropic", "claude-sonnet-4-5", 300_000, 1_000, 100_000),
             ("offline", "mutate", 1_000, 1_000, None)]  # no price: recorded cost (None here) stays unknown
    run = HandRun(tmp_path, "C", query_budget=10).task(1, "1_One").baseline(1, 1.0)
    for i, (provider, model, prompt, output, cached) in enumerate(cases, 1):
        run.attempt(1, i, "correct", 1.0, provider=provider, model=model, prompt_tokens=prompt,
                    output_tokens=output, cached_tokens=cached)
    con = database([run.write()])
    got = {r["idx"]: r["cost"] for r in rows(con, "FROM call_costs")}
    table = PriceTable.load()
    for i, (provider, model, prompt, output, cached) in enumerate(cases, 1):
        expected = table.cost(provider, model, Usage(prompt_tokens=prompt, output_tokens=output, cached_tokens=cached))
        assert got[i] == (pytest.approx(expected) if expected is not None else None), (provider, model)
    assert got[1] == pytest.approx(250_000 * 2.5e-6 + 10_000 * 15e-6)
    summary = rows(con, "FROM run_summary")[0]
    assert summary["unknown_cost_calls"] == 1
    assert summary["money_score"] is None  # summary.csv gives no money score computed from part of the calls
    assert all(not r["cost_known"] for r in rows(con, "FROM score_vs_money"))


def test_outcome_counts(con_a):
    counts: dict[str, int] = {}
    for r in rows(con_a, "FROM outcomes"):
        counts[r["category"]] = counts.get(r["category"], 0) + r["n"]
    assert counts == {"compile_error": 2, "runtime_error": 2, "timeout": 1, "incorrect": 2, "rejected": 1,
                      "correct": 8, "llm_error": 1}  # 17 attempts within the budget (q5 of hand/1 is not)
    by_role = {(r["role"], r["category"]): r["n"] for r in rows(con_a, "FROM outcomes")}
    assert by_role[("fix", "correct")] == 2 and by_role[("fix", "runtime_error")] == 1


def test_efa_repairs(con_a):
    efa = rows(con_a, "FROM efa")[0]
    # Failed first attempts: hand/1 q1, hand/2 q2 and q4, hand/3 q1, q3 and q4, hand/5 q1 (hand/3 q2 is an
    # LLM error: nothing to fix). Repaired: hand/2 q2 (by q3) and hand/5 q1 (by q3, a fix of the fix q2).
    assert (efa["failed"], efa["repaired"], efa["fix_attempts"], efa["fix_correct"]) == (7, 2, 3, 2)
    by_category = {r["root_category"]: (r["failed"], r["repaired"]) for r in rows(con_a, "FROM efa_by_category")}
    assert by_category == {"compile_error": (2, 1), "incorrect": (2, 1), "runtime_error": (1, 0), "timeout": (1, 0),
                           "rejected": (1, 0)}
    # With budget 2, hand/5's repair (q3) and hand/2's (q3) are out of reach.
    assert rows(database([_run_dir(con_a)], budget=2), "FROM efa")[0]["repaired"] == 0


def test_reference_lines_from_runs_and_baseline_sets(run_a, tmp_path):
    con = database([run_a], [write_baseline_set(tmp_path / "h100")])
    refs = {(r["source"], r["mode"]): r for r in rows(con, "FROM reference_scores")}
    # Run A's own torch.compile: hand/1 10/5 = 2, hand/2 4/8 = 0.5 (clamped 1), hand/5 incorrect -> 1.
    assert refs[("A", "compile")]["score"] == pytest.approx(2 ** (1 / 3))
    assert refs[("A", "compile")]["score_raw"] == pytest.approx(1.0)
    assert refs[("A", "compile")]["n_correct"] == 2
    # The baseline set: hand/1 10/4, hand/2 4/2; hand/9 is in no run and is left out.
    assert refs[("h100-set", "compile-max-autotune")]["score"] == pytest.approx(math.sqrt(2.5 * 2))
    assert refs[("h100-set", "compile-max-autotune")]["n_tasks"] == 2
    sets = rows(con, "FROM baseline_sets")
    assert sets[0]["baseline_set"] == "h100-set" and sets[0]["gpu"] == "H100"
    # A set's eager timings never become a run's baseline (no mixing of hosts).
    assert curve(con) == pytest.approx({1: 1.0, 2: 2 ** 0.25, 3: 4 ** 0.25, 4: 2.0})


def test_run_in_progress_with_a_torn_journal(tmp_path):
    run = HandRun(tmp_path, "live", query_budget=10, finished=False).task(1, "1_One").task(2, "2_Two")
    run.baseline(1, 6.0).baseline(2, 6.0).attempt(1, 1, "correct", 3.0).attempt(1, 2, "correct", 2.0)
    run.attempt(2, 1, "incorrect")
    path = run.write()
    with (path / "journal.jsonl").open("a") as handle:
        handle.write('{"type": "attempt", "task": "hand/2", "key": "q002", "ind')  # the writer is mid-line
    con = database([path])
    summary = rows(con, "FROM run_summary")[0]
    assert summary["status"] == "running" and summary["budget"] == 10 and summary["queries_done"] == 2
    assert summary["score"] == pytest.approx(math.sqrt(3.0 * 1.0))
    assert max(curve_of(con, "live")) == 2


def test_one_oversized_record_is_cut_and_every_run_still_loads(tmp_path, cli):
    # A forged result's reason past DuckDB's 16 MB line limit (read_json's maximum_object_size) made the
    # whole load fail: run.duckdb was not written, and every report holding the run failed.
    huge = 17_000_000
    forged = HandRun(tmp_path, "forged").task(1, "1_One")
    forged.baseline(1, 6.0).attempt(1, 1, "rejected").attempt(1, 2, "correct", 3.0)
    attempt = next(e for e in forged.events if e["type"] == "attempt" and e["key"] == "q001")
    attempt["reason"] = "REASON-HEAD " + "r" * huge
    attempt["check"] = {"forged": ["not", "text"]}
    evaluation = next(e for e in forged.events if e["type"] == "eval" and e["key"] == "q001")
    evaluation["result"]["environment"]["gpu_clocks"] = {"note": "c" * huge}
    forged.call(1, "q003", role="optimize", index=3, ok=False)
    forged.events[-1]["error"] = "e" * huge
    # A row of 36 MB in texts each under the cut, which no cut shortens: the reader is told its size.
    correct_attempt = next(e for e in forged.events if e["type"] == "attempt" and e["key"] == "q002")
    correct_attempt["meta"]["forged"] = ["m" * 90_000] * 400
    ordinary = HandRun(tmp_path, "ordinary").task(1, "1_One")
    ordinary.baseline(1, 6.0).attempt(1, 1, "correct", 2.0)
    paths = [forged.write(), ordinary.write()]

    target = store_db.write_run_database(paths[0])
    con = duckdb.connect(str(target), read_only=True)
    reason, check, clocks = con.execute(
        "SELECT reason, check_name, clocks->>'$.note' FROM attempts WHERE key = 'q001'").fetchone()
    cut = f" ... [cut: the first {store_db.TEXT_CELL_CHARS:,} of {huge + 12:,} characters]"
    assert reason == ("REASON-HEAD " + "r" * huge)[:store_db.TEXT_CELL_CHARS] + cut
    assert check == '{"forged": ["not", "text"]}'
    assert len(clocks) < store_db.TEXT_CELL_CHARS + 100 and clocks.endswith(f"of {huge:,} characters]")
    error = con.execute("SELECT error FROM llm_calls WHERE key = 'q003'").fetchone()[0]
    assert len(error) < store_db.TEXT_CELL_CHARS + 100
    assert con.execute("SELECT json_array_length(meta->'$.forged') FROM attempts WHERE key = 'q002'").fetchone()[0] == 400
    con.close()

    con = database(paths)  # a report's tables and metrics, of both runs
    summary = {r["run"]: r for r in rows(con, "FROM run_summary")}
    assert summary["forged"]["score"] == pytest.approx(2.0) and summary["ordinary"]["score"] == pytest.approx(3.0)
    result = cli("report", "--input", str(tmp_path), "--output", str(tmp_path / "report"), "--format", "csv")
    assert result.exit_code == 0, result.output
    with (tmp_path / "report" / "summary.csv").open() as handle:
        assert {r["run"] for r in csv.DictReader(handle)} == {"forged", "ordinary"}


def curve_of(con: duckdb.DuckDBPyConnection, run: str) -> dict[int, float]:
    return {r["queries"]: r["score"] for r in rows(con, "FROM score_vs_queries WHERE run = ?", [run])}


def test_attempts_timed_on_other_hardware_than_their_baseline_are_flagged(tmp_path):
    """A run resumed on another GPU model: its speedups compare two machines, and the report says so."""
    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    run = HandRun(tmp_path, "moved").task(1, "1_One").task(2, "2_Two")
    run.baseline(1, 6.0, device_name=h100).baseline(2, 6.0, device_name=h100)
    run.attempt(1, 1, "correct", 3.0, device_name=h100).attempt(1, 2, "correct", 2.0, device_name=h200)
    run.attempt(1, 3, "incorrect", device_name=h200)  # not timed: nothing to compare
    run.attempt(2, 1, "correct", 4.0, device_name=h100)
    con = database([run.write()])
    flagged = rows(con, "SELECT task, key, hardware, baseline_hardware FROM timing_mismatch")
    assert flagged == [{"task": "hand/1", "key": "q002", "hardware": h200, "baseline_hardware": h100}]
    assert rows(con, "FROM run_summary")[0]["mismatched_timings"] == 1
    # Same hardware throughout (scenario A) flags nothing.
    same = database([scenario_a(tmp_path / "same")])
    assert rows(same, "FROM run_summary")[0]["mismatched_timings"] == 0


def test_materialized_views_hold_the_views_rows_and_the_saved_file_keeps_the_views(run_a, tmp_path):
    """The report computes each view once into a temporary table of the same name (materialize_views):
    every one must hold exactly what its view computes, and the file a reader opens must keep the views."""
    second = HandRun(tmp_path / "runs", "B").task(1, "1_Alpha").task(2, "2_Beta")
    second.baseline(1, 10.0).baseline(2, 4.0, mode="compile").attempt(1, 1, "correct", 4.0)
    second.attempt(2, 1, "incorrect").attempt(2, 2, "correct", 1.0, role="fix", parent=1)
    path = tmp_path / "report.duckdb"
    con = duckdb.connect(str(path))
    materialize([run_a, second.write()], con, baseline_dirs=[write_baseline_set(tmp_path / "set")])
    create_metrics(con, MetricParams(), price_rows(con, None, ()))
    names = [name for name, _ in VIEWS]
    before = {name: con.execute(f"FROM {name}").fetchall() for name in names}
    assert sum(map(len, before.values())) > 100  # the comparison compares something
    materialize_views(con)
    temp = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
    assert temp == set(names)
    for name in names:
        assert sorted(map(repr, con.execute(f"FROM {name}").fetchall())) == sorted(map(repr, before[name])), name
    con.close()
    saved = duckdb.connect(str(path), read_only=True)
    kinds = dict(saved.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    assert all(kinds[name] == "VIEW" for name in names)
