"""`pikeh report --retime`: each task's final best timed again, paired against its eager reference, by the
evaluator the report's options describe: the fake evaluator's deterministic paired timing (the report
machinery), and the real `local` evaluator on the CPU (smoke suite); reused by later reports while the
best's code is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pike_harness.cli import App
from pike_harness.testing import fake_evaluator_plugin, invoke

from .handmade import HandRun

GELU = """\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.gelu(x)
"""


@pytest.fixture
def smoke_run(tmp_path: Path) -> Path:
    App.reset()
    # Search time said 4x (1.0 ms against 0.25 ms); the fake evaluator times the pair at 2x.
    run = HandRun(tmp_path / "runs", "smoke-run", suite="smoke").task(5, "5_GELU").baseline(5, 1.0)
    run.attempt(5, 1, "incorrect").attempt(5, 2, "correct", 0.25, code=GELU)
    return run.write()


def summary_of(output: str) -> dict:
    return json.loads(output[output.index("["):])[0]


def retime_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "retime.jsonl").read_text().splitlines()]


def test_retime_replaces_the_search_time_number_with_the_paired_one(smoke_run, tmp_path):
    out = tmp_path / "report"
    plugin = fake_evaluator_plugin()
    result = invoke("report", "--input", str(smoke_run), "--output", str(out), "--format", "csv", "--json",
                    "--retime", "--retime-halfwidth", "0.05", "--evaluator", "fake", plugins={"fake": plugin})
    assert result.exit_code == 0, result.output[-3000:]
    [asked] = plugin.built[0].requests  # one paired request per finalist: the pairing is the evaluator's
    assert asked.paired is not None and asked.paired.target_halfwidth == 0.05 and asked.candidate_source == GELU
    [row] = retime_rows(out)
    assert row["task"] == "smoke/5" and row["best_key"] == "q002" and row["source"] == "report"
    assert row["speedup"] == pytest.approx(2.0, rel=0.01) and row["ci_low"] < 2.0 < row["ci_high"]
    summary = summary_of(result.output)
    assert summary["score"] == pytest.approx(row["speedup"]) and summary["n_retimed"] == 1
    assert summary["search_score"] == pytest.approx(4.0)
    retime_csv = (out / "retime.csv").read_text().splitlines()
    assert retime_csv[0].startswith("run,task,name,speedup,ci_low,ci_high,n_pairs") and len(retime_csv) == 2
    # A later report without --retime reuses the stored re-timing (the best code is unchanged)...
    again = invoke("report", "--input", str(smoke_run), "--output", str(out), "--format", "csv", "--json")
    assert summary_of(again.output)["score"] == pytest.approx(summary["score"])
    # ...and a report that picks another best (here: none, under a budget of 1) does not use it.
    other = invoke("report", "--input", str(smoke_run), "--output", str(out), "--format", "csv", "--json",
                   "--budget", "1")
    assert summary_of(other.output)["n_retimed"] is None


@pytest.mark.slow
def test_retime_with_the_local_evaluator(smoke_run, tmp_path):
    if "local" not in App.host().names("evaluators"):
        pytest.skip("the local evaluator plugin is not installed")
    out = tmp_path / "report"
    result = invoke("report", "--input", str(smoke_run), "--output", str(out), "--format", "csv", "--json",
                    "--retime", "--device", "cpu", "--protocol", "quick", "--retime-max-seconds", "5")
    assert result.exit_code == 0, result.output[-3000:]
    [row] = retime_rows(out)
    assert row["category"] == "correct" and row["best_key"] == "q002"
    summary = summary_of(result.output)
    # The engine pairs on the CPU too: the report's number is the paired one, never the search-time one.
    assert row["speedup"] is not None, row
    assert row["ci_low"] <= row["speedup"] <= row["ci_high"] and row["n_pairs"] >= 2
    assert summary["score"] == pytest.approx(max(1.0, row["speedup"]))
