"""The noise benchmark (benchmarks/bench_noise.py) on the CPU: task lists, verdicts and reasons of a
miss, and a resumable run over two smoke tasks with a build feeder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from perf_helpers import benchmark_module

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"


@pytest.fixture(scope="module")
def noise():
    with benchmark_module("bench_noise") as module:
        yield module


def test_task_lists_name_suites_ids_and_ranges(noise):
    assert [t.ref for t in noise.parse_tasks("smoke/1,2,5")] == ["smoke/1", "smoke/2", "smoke/5"]
    assert [t.ref for t in noise.parse_tasks("smoke/2-3,smoke/2")] == ["smoke/2", "smoke/3"]
    everything = [t.ref for t in noise.parse_tasks("smoke")]
    assert len(everything) >= 6 and everything[0] == "smoke/1"
    with pytest.raises(SystemExit):
        noise.parse_tasks("3")  # ids without a suite before them


def run(ms: float, cv: float = 0.01, loads: int = 13, category: str = "correct") -> dict:
    return {"runtime_ms": ms if category == "correct" else None, "within_run_cv": cv, "concurrent_loads": loads,
            "category": category, "reason": None if category == "correct" else "boom"}


def test_verdict_and_measured_reasons(noise):
    quiet = noise.task_summary({"task": "x/1", "alone": [run(10.0), run(10.05)],
                                "loaded": [run(10.1), run(10.12), run(10.08)]})
    assert quiet["meets"] and quiet["reasons"] == [] and abs(quiet["ratio"] - 1.0075) < 1e-3

    drifting = noise.task_summary({"task": "x/2", "alone": [run(10.0), run(10.5)],
                                   "loaded": [run(11.0), run(11.0), run(11.0)]})
    assert not drifting["meets"] and drifting["misses"] == ["ratio 1.073"]
    assert drifting["reasons"] == ["alone runs themselves differ by 4.9%"]

    disturbed = noise.task_summary({"task": "x/3", "alone": [run(10.0), run(10.0)],
                                    "loaded": [run(10.0, 0.2), run(12.0, 0.2), run(10.0, 0.2)]})
    assert not disturbed["meets"] and disturbed["misses"][0].startswith("CV ")
    assert disturbed["reasons"] == ["within-run CV 20.0% loaded against 1.0% alone"]

    unexplained = noise.task_summary({"task": "x/4", "alone": [run(10.0), run(10.0)],
                                      "loaded": [run(10.5), run(10.5), run(10.5)]})
    assert not unexplained["meets"] and unexplained["reasons"] == []
    settings = {"device": "cpu", "protocol": "robust", "reps": 3, "reps_alone": 2, "builds": 13, "inline": "cuda"}
    text = noise.markdown([{"task": "x/4", "alone": [run(10.0), run(10.0)],
                            "loaded": [run(10.5), run(10.5), run(10.5)]}], settings, [])
    assert f"| missed: ratio 1.050 | {noise.UNEXPLAINED} |" in text and "**0 of 1 tasks meet the goal**" in text
    assert "| while compiling | 3 |" in text  # one task: the per-condition table follows

    failed = noise.task_summary({"task": "x/5", "alone": [run(10.0), run(10.0)],
                                 "loaded": [run(10.0), run(0, category="timeout")]})
    assert not failed["meets"]
    assert failed["reasons"][0].startswith("1 run(s) not timed (timeout")
    assert "1 loaded run(s) timed: no CV" in failed["reasons"]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the three runs' timeouts below, and more
def test_noise_run_over_two_tasks_resumes_and_stops_at_the_budget(tmp_path):
    out, state = tmp_path / "out", tmp_path / "state"
    # --budget-s far above need: a loaded runner must not end the run at the budget (exit 3); only the
    # `tight` run below tests the budget stop
    command = [sys.executable, str(BENCH / "bench_noise.py"), "--device", "cpu", "--tasks", "smoke/1,2",
               "--reps", "2", "--reps-alone", "2", "--warmup-runs", "0", "--builds", "1", "--jobs", "2",
               "--inline", "tiny", "--protocol", "quick", "--ramp-s", "0.5", "--out", str(out), "--state", str(state),
               "--workdir", str(tmp_path / "work"), "--budget-s", "1800"]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "plugins")])}
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=2000)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    lines = (state / "noise.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["task"] for r in rows] == ["smoke/1", "smoke/2"]
    for row in rows:
        assert [r["phase"] for r in row["alone"]] == ["alone (before)", "alone (after)"]
        assert [r["phase"] for r in row["loaded"]] == ["loaded", "loaded"]
        assert all(r["category"] == "correct" and r["runtime_ms"] > 0 for r in row["alone"] + row["loaded"])
        assert all(r["concurrent_loads"] == 0 for r in row["alone"])  # the feeder's builds were aborted
        assert row["feeder"]["submitted"] >= 1 and row["duration_s"] > 0
    assert (out / "noise.jsonl").read_text() == (state / "noise.jsonl").read_text()  # travels back with --out
    payload = json.loads((out / "noise.json").read_text())
    assert payload["finished"] and [t["task"] for t in payload["tasks"]] == ["smoke/1", "smoke/2"]
    report = (out / "noise.md").read_text()
    assert "| task | alone median (ms) | loaded median (ms) | loaded / alone | CV loaded |" in report
    assert "| 1_MatmulReLU |" in report and "| 2_Softmax |" in report
    assert "of 2 tasks meet the goal" in report

    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (state / "noise.jsonl").read_text().splitlines() == lines  # nothing measured twice
    assert "2 of 2 tasks already" in again.stdout and "alone (before)" not in again.stdout

    # a third task that cannot fit: nothing is started, the report says what is left, exit status 3
    tight = [*command[:command.index("--tasks") + 1], "smoke/1,2,3", *command[command.index("--tasks") + 2:-1],
             "30", "--margin-s", "25"]
    stopped = subprocess.run(tight, capture_output=True, text=True, env=env, timeout=600)
    assert stopped.returncode == 3, stopped.stdout[-3000:] + stopped.stderr[-3000:]
    assert "stopping before smoke/3" in stopped.stdout
    assert (state / "noise.jsonl").read_text().splitlines() == lines
    assert "1 not measured yet (smoke/3)" in (out / "noise.md").read_text()
