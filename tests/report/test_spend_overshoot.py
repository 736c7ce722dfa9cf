"""The report's dollar figures count every journaled LLM call, a round's overshoot past the query budget
included: those queries were sent and paid. Only the curves (score vs queries, score vs dollars) stay
within the budget.

Audit finding H3: PIKE-B sends a round of branches at once, so a task of budget 5 asks 6 or 7 queries;
the report dropped the calls past the budget from `$/task` and `spend_usd` (smoke/2: $10.07 of the
$14.59 the run's own table showed). Two checks: a hand-made journal whose numbers are worked out by
hand against a twin without the overshoot, and a whole `pikeh run` (real openai SDK against the loopback
fake model, fake evaluator) whose end table, journal and report must agree.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import duckdb
import pytest
from pikeh_duckdb.metrics import MetricParams, create_metrics, rows
from pikeh_duckdb.reporter import price_rows

from pike_harness.contracts.llm import Usage
from pike_harness.host.pricing import PriceTable
from pike_harness.host.store import read_journal
from pike_harness.host.store_db import materialize
from pike_harness.testing import FakeLLMServer, fake_evaluator_plugin, invoke
from pike_harness.testing.llm_server import mutate_reply

from .handmade import HandRun


def _database(run_dirs: list[Path]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    materialize(run_dirs, con)
    create_metrics(con, MetricParams(), price_rows(con, None, ()))
    return con


def _overshoot_run(root: Path, name: str, *, overshoot: bool) -> Path:
    """Budget 4. hand/1: brainstorm, a round of 3 (q1-q3), then a round of 3 of which only q4 is within
    the budget: q5 (1 ms, the fastest of all) and q6 are the overshoot, sent and paid with the round.
    hand/2: brainstorm and 4 queries, nothing past the budget. ``overshoot=False``: the same run without
    q5 and q6 (what the curves must still show)."""
    run = HandRun(root, name, query_budget=4)
    run.task(1, "1_Alpha").task(2, "2_Beta")
    run.brainstorm(1).baseline(1, 10.0)
    run.attempt(1, 1, "correct", 5.0).attempt(1, 2, "compile_error").attempt(1, 3, "correct", 8.0)
    run.attempt(1, 4, "correct", 4.0)
    if overshoot:
        run.attempt(1, 5, "correct", 1.0).attempt(1, 6, "incorrect", output_tokens=30_000)
    run.brainstorm(2).baseline(2, 4.0)
    run.attempt(2, 1, "incorrect").attempt(2, 2, "correct", 2.0).attempt(2, 3, "llm_error")
    run.attempt(2, 4, "correct", 1.0)
    return run.write()


def _journal_costs(run_dir: Path) -> dict[str, float]:
    """Each task's sum of every journaled call's cost at the shipped price table, whatever its index."""
    table, spend = PriceTable.load(), {}
    for event in read_journal(run_dir / "journal.jsonl"):
        if event["type"] == "llm":
            response = event["response"]
            cost = table.cost(response["provider"], response["model"], Usage(**response["usage"]))
            spend[event["task"]] = spend.get(event["task"], 0.0) + cost
    return spend


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("overshoot")
    return _overshoot_run(root, "over", overshoot=True), _overshoot_run(root, "within", overshoot=False)


def test_spend_counts_every_paid_call_and_the_curves_stay_within_the_budget(twins):
    over, within = twins
    paid = _journal_costs(over)
    # Worked by hand: a counted call (40k + 10k tokens at $1.25 / $10 per M) costs $0.15, q6 (40k + 30k)
    # $0.35, a brainstorm (8k + 2k) $0.03; hand/2's q3 failed (LLM error) and cost nothing.
    assert paid == pytest.approx({"hand/1": 0.03 + 5 * 0.15 + 0.35, "hand/2": 0.03 + 3 * 0.15})
    con = _database([over, within])
    final = {(r["run"], r["task"]): r for r in rows(con, "FROM task_final")}
    for task, total in paid.items():
        assert final[("over", task)]["spend_usd"] == pytest.approx(total)
        assert final[("over", task)]["cost_known"] is True
    assert final[("over", "hand/1")]["spend_in_budget_usd"] == pytest.approx(0.03 + 4 * 0.15)  # labelled part
    assert final[("over", "hand/2")]["spend_in_budget_usd"] == pytest.approx(paid["hand/2"])
    # The overshoot is the only difference from the twin: its calls' cost, nothing else.
    assert final[("over", "hand/1")]["spend_usd"] - final[("within", "hand/1")]["spend_usd"] == pytest.approx(0.50)
    costs = {r["run"]: r for r in rows(con, "FROM run_costs")}
    assert costs["over"]["spend_usd"] == pytest.approx(sum(paid.values()))
    assert costs["over"]["calls_past_budget"] == 2 and costs["within"]["calls_past_budget"] == 0
    assert costs["over"]["spend_in_budget_usd"] == pytest.approx(costs["within"]["spend_usd"])
    summary = {r["run"]: r for r in rows(con, "FROM run_summary")}
    assert summary["over"]["usd_per_task"] == pytest.approx(sum(paid.values()) / 2)
    assert summary["over"]["past_budget"] == 2 and summary["over"]["unknown_cost_calls"] == 0

    # The within-budget figures are those of the twin: q5's 1 ms (10x) and the overshoot's dollars
    # never reach a curve, the final best, fast_p or the score at the money budget.
    def same(query: str, key: tuple[str, ...]) -> None:
        by_run: dict[str, list[tuple]] = {"over": [], "within": []}
        for r in rows(con, query):
            by_run[r["run"]].append(tuple(round(r[k], 9) if isinstance(r[k], float) else r[k] for k in key))
        assert by_run["over"] and sorted(by_run["over"]) == sorted(by_run["within"]), query

    same("FROM score_vs_queries", ("queries", "score", "score_raw", "n_solved"))
    same("FROM score_vs_money", ("usd", "score", "score_raw", "n_solved"))
    same("FROM fast_p", ("p", "fast_p"))
    same("SELECT * FROM task_final", ("speedup", "best_ms", "best_idx", "n_attempts", "n_correct", "queries",
                                     "spend_in_budget_usd"))
    for column in ("score", "money_score", "fast_1", "queries_done"):
        assert summary["over"][column] == pytest.approx(summary["within"][column]), column
    assert final[("over", "hand/1")]["best_idx"] == 4  # q5 (1 ms) is past the budget: not the best
    # The money curve ends at the first point past the largest spend within the budget ($0.63), as the twin's.
    assert max(r["usd"] for r in rows(con, "FROM score_vs_money WHERE run = 'over'")) == pytest.approx(0.8)


def test_report_files_show_the_paid_spend(twins, tmp_path):
    over, _ = twins
    paid = _journal_costs(over)
    out = tmp_path / "report"
    result = invoke("report", "--input", str(over), "--output", str(out), "--format", "csv", "--json")
    assert result.exit_code == 0, result.output[-3000:]
    summary = json.loads(result.output[result.output.index("["):result.output.rindex("]") + 1])[0]
    assert summary["usd_per_task"] == pytest.approx(sum(paid.values()) / 2)
    with (out / "per_task_long.csv").open() as handle:
        long = {r["task"]: r for r in csv.DictReader(handle)}
    for task, total in paid.items():
        assert float(long[task]["spend_usd"]) == pytest.approx(total)
    assert float(long["hand/1"]["spend_in_budget_usd"]) == pytest.approx(0.63)
    with (out / "summary.csv").open() as handle:
        assert float(next(csv.DictReader(handle))["usd_per_task"]) == pytest.approx(sum(paid.values()) / 2)


def test_a_pike_b_run_and_its_report_agree_on_what_was_paid(tmp_path):
    """PIKE-B, budget 5, rounds of 3 branches: each task asks past its budget. The fake model is billed
    at the price file's rates; every request it answered is journaled, and the run's end table, its
    task_end events and the report give each task the same spend, the overshoot included."""
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."openai:fake-coder"]\ninput = 1000.0\noutput = 2000.0\n')
    env = {"OPENAI_API_KEY": "sk-test-overshoot-0123456789", "PIKEH_PRICES": str(prices)}
    with FakeLLMServer(reply=mutate_reply) as server:
        run = invoke("run", "--strategy", "pike-b", "--suite", "smoke", "--tasks", "1,2",
                     "--llm", "openai:fake-coder", "--llm-base-url", server.openai_base_url,
                     "--query-budget", "5", "--num-branches", "3", "--max-parents", "2", "--max-ideas", "3",
                     "--max-fix-attempts", "1", "--evaluator", "fake", "--no-final-retime",
                     "--output-dir", str(tmp_path), "--run-name", "r", plugins={"fake": fake_evaluator_plugin()},
                     env=env)
        billed = server.count()
    assert run.exit_code == 0, run.output[-3000:]
    events = read_journal(tmp_path / "r" / "journal.jsonl")
    calls = [e for e in events if e["type"] == "llm"]
    assert len(calls) == billed  # every request the model answered (and billed) is journaled
    journal_spend: dict[str, float] = {}
    for e in calls:
        journal_spend[e["task"]] = journal_spend.get(e["task"], 0.0) + e["response"]["cost_usd"]
    ends = {e["task"]: e for e in events if e["type"] == "task_end"}
    past = {t: e["queries_used"] - 5 for t, e in ends.items()}
    assert set(past) == {"smoke/1", "smoke/2"} and all(n > 0 for n in past.values()), past  # the overshoot
    table = dict(re.findall(r"^\s*(smoke/\d)\s.*?\$(\d+\.\d\d)\s", run.output, flags=re.M))
    for task, total in journal_spend.items():
        assert ends[task]["spend_usd"] == pytest.approx(total)
        assert table[task] == f"{total:.2f}"  # the run's own end table

    out = tmp_path / "report"
    report = invoke("report", "--input", str(tmp_path / "r"), "--output", str(out), "--format", "csv", "--json",
                    env=env)
    assert report.exit_code == 0, report.output[-3000:]
    summary = json.loads(report.output[report.output.index("["):report.output.rindex("]") + 1])[0]
    assert summary["usd_per_task"] == pytest.approx(sum(journal_spend.values()) / 2)
    with (out / "per_task_long.csv").open() as handle:
        long = {r["task"]: r for r in csv.DictReader(handle)}
    for task, total in journal_spend.items():
        assert float(long[task]["spend_usd"]) == pytest.approx(total)
        assert f"{float(long[task]['spend_usd']):.2f}" == table[task]
        assert float(long[task]["spend_in_budget_usd"]) < float(long[task]["spend_usd"])  # the overshoot's part
    con = duckdb.connect(str(out / "report.duckdb"), read_only=True)
    by_task = dict(con.execute("SELECT task, spend_usd FROM task_final").fetchall())
    own = dict(con.execute("SELECT task, spend_usd FROM tasks").fetchall())  # the run's task_end figure
    assert by_task == pytest.approx(own)
