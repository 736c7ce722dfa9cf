"""The fidelity benchmark on the CPU: the plain loop's protocol, and a resumable end-to-end run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from perf_helpers import benchmark_module

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
SMOKE = REPO / "tasks" / "smoke"

FACTORY = '''
import torch.nn as nn


def Model(input_size, hidden_size, output_size):
    """A factory function, as some METR solutions write ModelNew/Model."""
    return nn.Sequential(nn.Linear(input_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, hidden_size),
                         nn.ReLU(), nn.Linear(hidden_size, output_size))
'''

WRONG = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''


@pytest.fixture(scope="module")
def plain_loop():
    with benchmark_module("plain_loop") as module:
        yield module


def test_plain_loop_accepts_a_factory_and_times_both_models(plain_loop, tmp_path):
    import torch

    solution = tmp_path / "task_6.py"
    solution.write_text(FACTORY)
    out = plain_loop.measure(SMOKE / "6_MLP3.py", solution, torch.device("cpu"), repeats=2, warmup_ms=1,
                             rep_ms=5, atol=1e-2, rtol=1e-2)
    assert out["verdict"] == "correct", out
    assert out["max_diff"] == 0.0  # the same weights under seed 1, the same inputs under seed 0
    assert len(out["eager_ms"]) == 2 and len(out["solution_ms"]) == 2
    assert all(t > 0 for t in out["eager_ms"] + out["solution_ms"])
    assert len(out["eager_median_ms"]) == 2 and all(t > 0 for t in out["solution_median_ms"])


def test_plain_loop_rejects_a_wrong_solution_without_timing_it(plain_loop, tmp_path):
    import torch

    solution = tmp_path / "task_2.py"
    solution.write_text(WRONG)
    out = plain_loop.measure(SMOKE / "2_Softmax.py", solution, torch.device("cpu"), repeats=1, warmup_ms=1,
                             rep_ms=2, atol=1e-5, rtol=1e-3)
    assert out["verdict"] == "incorrect" and out["max_diff"] > 1e-3
    assert "solution_ms" not in out and len(out["eager_ms"]) == 1


@pytest.mark.slow
@pytest.mark.timeout(3000)  # the two runs' timeouts below, and more
def test_fidelity_run_reports_both_sides_and_resumes(tmp_path):
    folder = tmp_path / "solutions"
    folder.mkdir()
    (folder / "task_6.py").write_text(FACTORY)
    (folder / "task_2.py").write_text((SMOKE / "2_Softmax.py").read_text().replace("class Model(", "class ModelNew("))
    out, state = tmp_path / "out", tmp_path / "state"
    # --budget-s far above need: a loaded runner must not end the run at the budget (partial rows)
    command = [sys.executable, str(BENCH / "fidelity.py"), "--suite", "smoke", "--solutions", str(folder),
               "--device", "cpu", "--warmup-ms", "2", "--rep-ms", "10", "--plain-repeats", "1", "--warm-jobs", "1",
               "--out", str(out), "--state", str(state), "--workdir", str(tmp_path / "work"), "--budget-s", "1800"]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "plugins")])}
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=2000)
    assert first.returncode == 0, first.stderr[-3000:]
    lines = (state / "fidelity.jsonl").read_text().splitlines()
    keys = {json.loads(line)["key"] for line in lines}
    assert {"plain|2", "plain|6", "harness|pike|all|eager:2", "harness|pike|all|task_2.py",
            "harness|pike|all|task_6.py", "plainwarm|task_6.py"} <= keys
    payload = json.loads((out / "fidelity.json").read_text())
    rows = {row["task"]: row for row in payload["comparisons"][0]["rows"]}
    assert rows[2]["harness"] == "correct" and rows[2]["plain"] == "correct"
    assert rows[2]["eager_ratio"] is not None and rows[2]["speedup_plain"] is not None
    assert rows[6]["plain"] == "correct"  # the independent side accepts a factory function
    report = (out / "reports" / "fidelity-cpu.md").read_text()
    assert "| 2 Softmax | correct | correct |" in report
    assert (out / "fidelity.jsonl").read_text() == (state / "fidelity.jsonl").read_text()

    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (state / "fidelity.jsonl").read_text().splitlines() == lines  # nothing measured twice
    assert "harness pike/all" not in again.stdout


STATEFUL = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Right on the first call only: adds how often it was called before."""

    def __init__(self, scale):
        super().__init__()
        self.scale, self.calls = scale, 0

    def forward(self, x):
        self.calls += 1
        return torch.softmax(x * self.scale, dim=-1) + (self.calls - 1) * 0.5
'''

STALE = '''
import torch
import torch.nn as nn

_SAVED = {}


class ModelNew(nn.Module):
    """Computes once per process and returns that output for every input, as a stale CUDA graph does."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        if "y" not in _SAVED:
            _SAVED["y"] = torch.relu(self.linear(x))
        return _SAVED["y"]
'''


@pytest.fixture(scope="module")
def probes(plain_loop):
    import pike_probes

    return pike_probes


def test_probes_find_state_kept_across_calls(probes, tmp_path):
    import torch

    solution = tmp_path / "task_2.py"
    solution.write_text(STATEFUL)
    out = probes.probe(SMOKE / "2_Softmax.py", solution, torch.device("cpu"), atol=1e-5, rtol=1e-3)
    assert out["one_call"] == {"ok": True, "max_diff": 0.0}  # PIKE's one-call check passes it
    assert not out["call_twice"]["ok"] and out["call_twice"]["call1_vs_call2"] == pytest.approx(0.5)
    assert out["second_instance"]["ok"] and out["new_input"]["ok"]  # each fresh instance's first call is right


def test_probes_find_an_output_that_ignores_its_input(probes, tmp_path):
    import torch

    solution = tmp_path / "task_1.py"
    solution.write_text(STALE)
    out = probes.probe(SMOKE / "1_MatmulReLU.py", solution, torch.device("cpu"), atol=1e-2, rtol=1e-2)
    assert out["one_call"]["ok"] and out["call_twice"]["ok"] and out["second_instance"]["ok"]
    assert not out["new_input"]["ok"]
    sensitivity = out["input_sensitivity"]
    assert sensitivity["solution_moves"] == 0.0 and sensitivity["reference_moves"] > 0.1 and not sensitivity["ok"]


def test_probes_take_no_unchanged_output_for_ignoring_an_input_the_reference_ignores(probes, tmp_path):
    """A reference that moves only by rounding of its size (its classifier's bias) and a half-precision
    solution that returns the same bits for both inputs: no sign of ignoring the input."""
    import torch

    eval_dir = Path(__file__).resolve().parents[1] / "eval"
    solution = tmp_path / "task_2.py"
    solution.write_text((eval_dir / "corpus" / "ok_constant_reference.py").read_text(encoding="utf-8"))
    out = probes.probe(eval_dir / "tasks" / "2_BiasHead.py", solution, torch.device("cpu"), atol=1e-2, rtol=1e-2)
    sensitivity = out["input_sensitivity"]
    assert sensitivity["solution_moves"] == 0.0 and 0.0 < sensitivity["reference_moves"] < 1e-6
    assert sensitivity["ok"] and out["new_input"]["ok"]


def test_audit_names_what_breaks_and_recomputes_the_suite_score(probes, tmp_path):
    """The audit's table and findings from real probe results, our verdicts and plain-loop timings."""
    import pike_audit
    import torch
    from fidelity_runs import State

    from pike_harness.host.tasks import load_suite

    suite = load_suite(SMOKE, origin="test")
    folder = tmp_path / "solutions"
    folder.mkdir()
    (folder / "task_2.py").write_text(STATEFUL)
    (folder / "task_6.py").write_text(FACTORY)
    work = [(suite.task(2), folder / "task_2.py"), (suite.task(6), folder / "task_6.py")]
    state = State(tmp_path / "state")
    for task, path in work:
        result = probes.probe(task.path, path, torch.device("cpu"), task.meta.atol, task.meta.rtol)
        state.add({"key": f"probe|{path.name}", "kind": "probe", "file": path.name, "task": task.id, **result})
        state.add({"key": f"plain|{task.id}", "kind": "plain", "task": task.id, "verdict": "correct",
                   "eager_ms": [2.0, 2.0], "solution_ms": [1.0, 1.0]})
    state.add({"key": "harness|pike|all|task_2.py", "kind": "harness", "task": 2, "category": "incorrect",
               "check": "stateful", "reason": "wrong on call 2"})
    state.add({"key": "harness|pike|all|task_6.py", "kind": "harness", "task": 6, "category": "compile_error",
               "check": "load", "reason": "defines none of ModelNew, Model"})

    rows = pike_audit.audit_rows(work, State(tmp_path / "state"))  # read back from the JSONL
    by_task = {r["task"]: r for r in rows}
    # the accumulator also breaks when the same instance meets a new input (its state is still there)
    assert by_task[2]["pike"] == "correct" and by_task[2]["breaks"] == ["call_twice", "reused_new_input"]
    assert not by_task[2]["really_passes"] and by_task[2]["disagree"] is True  # a catch PIKE misses
    assert by_task[6]["really_passes"] and by_task[6]["disagree"] is True
    summary = pike_audit.summary(rows)
    assert summary["geomean_pike_verdicts"] == pytest.approx(2.0)  # both pass PIKE's one call, 2x each
    assert summary["geomean_really_pass"] == pytest.approx(2 ** 0.5)  # task 2 counts 1.0
    text = pike_audit.markdown(rows, summary, {"gpu": "cpu", "torch": "t", "date": "d", "solutions": str(folder),
                                               "new_seed": 42, "suite": "smoke"})
    assert "call 1 max diff 0, call 2 with the same input 0.5" in text
    assert "the same instance then given seed 42's input" in text
    assert "**Task 6**: every variation passes, yet our verdict is `compile_error/load`" in text
    assert "| published (PIKE-B, paper) | 2.88x |" in text


def test_a_warm_up_counts_only_on_the_machine_whose_cache_it_filled(tmp_path):
    """The state travels between device calls, the caches do not: a fresh machine must warm again."""
    with benchmark_module("fidelity_runs") as runs:
        pass
    state = runs.State(tmp_path / "state")
    first = runs.cache_token(tmp_path / "cache-a")
    assert first == runs.cache_token(tmp_path / "cache-a")  # stable for one folder
    state.add({"key": "plainwarm|task_2.py", "kind": "plainwarm", "cache": first})
    assert runs.warmed_here(state, "plainwarm|task_2.py", first)
    assert not runs.warmed_here(state, "plainwarm|task_2.py", runs.cache_token(tmp_path / "cache-b"))
    assert not runs.warmed_here(state, "plainwarm|task_6.py", first)


@pytest.mark.slow
@pytest.mark.timeout(2400)  # the run's timeout below, and more
def test_bracket_times_plain_harness_plain_for_each_reference(tmp_path):
    folder = tmp_path / "solutions"
    folder.mkdir()
    (folder / "task_2.py").write_text((SMOKE / "2_Softmax.py").read_text())
    out = tmp_path / "out"
    command = [sys.executable, str(BENCH / "fidelity.py"), "--bracket", "--suite", "smoke", "--solutions",
               str(folder), "--device", "cpu", "--warmup-ms", "2", "--rep-ms", "10", "--out", str(out),
               "--state", str(tmp_path / "state"), "--workdir", str(tmp_path / "work"),
               "--budget-s", "1800"]  # far above need: a loaded runner must not end the run at the budget
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "plugins")])}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=2000)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "state" / "fidelity.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == ["bracket|plain-before|2", "bracket|harness|2", "bracket|plain-after|2"]
    assert rows[1]["category"] == "correct" and rows[0]["eager_ms"] and rows[2]["eager_ms"]
    (row,) = json.loads((out / "bracket.json").read_text())["rows"]
    assert row["ratio_mean"] == pytest.approx(row["harness_mean_ms"] * 2 / (row["plain_before_ms"]
                                                                           + row["plain_after_ms"]))
    assert "| 2 Softmax |" in (out / "reports" / "fidelity-bracket-cpu.md").read_text()


def _timings(mean_ms: float, spread: tuple[float, float], cv: float) -> dict[str, dict[str, float | list[float]]]:
    low, high = spread
    return {"harness": {"mean_ms": mean_ms, "median_ms": mean_ms, "cv": cv},
            "plain": {"mean_ms": (low + high) / 2, "min_ms": low, "max_ms": high, "repeats": [low, high]}}


def test_a_runtime_outside_the_tolerance_is_named_with_what_the_measurement_shows():
    """Each miss of the fidelity table names its reason: the plain loop's own spread, the harness's CV, or neither."""
    with benchmark_module("fidelity_runs") as runs:
        pass
    spread = _timings(1.2, (0.9, 1.1), 0.02)  # plain repeats 0.9 and 1.1: spread 20 %; ratio 1.2
    noisy = _timings(1.2, (0.99, 1.01), 0.35)  # plain steady (2 %), harness CV 0.35
    neither = _timings(1.2, (0.995, 1.005), 0.05)  # both steady: the miss stays unexplained
    within = _timings(1.01, (0.9, 1.1), 0.5)  # inside 5 %: nothing to explain, however noisy
    row = {"eager_harness": spread["harness"], "eager_plain": spread["plain"], "eager_ratio": 1.2,
           "solution_harness": noisy["harness"], "solution_plain": noisy["plain"], "solution_ratio": 1.2}
    misses = runs.miss_reasons(row, 0.05)
    assert misses == {"eager": ["the plain loop's own repeats spread 20.0%"],
                      "solution": ["the harness's calls spread with CV 0.35 within one evaluation"]}
    assert runs.miss_text(misses) == ("eager: the plain loop's own repeats spread 20.0%; "
                                      "solution: the harness's calls spread with CV 0.35 within one evaluation")
    row = {"eager_harness": within["harness"], "eager_plain": within["plain"], "eager_ratio": 1.01,
           "solution_harness": neither["harness"], "solution_plain": neither["plain"], "solution_ratio": 1.2}
    misses = runs.miss_reasons(row, 0.05)
    assert misses == {"solution": []}
    assert runs.miss_text(misses) == "solution: not explained by this measurement"
    assert runs.miss_reasons(row, 0.25) == {}  # robust's or a looser tolerance: nothing outside it
    # the bracket report uses the same helper and keeps its wording
    bracket = {"ratio_mean": 1.3, "plain_drift": 0.12, "harness_cv": 0.4}
    assert runs._bracket_reason(bracket) == ("the plain loop itself moved 12% within the bracket; "
                                             "the harness's calls spread with CV 0.40 within one evaluation")
    assert runs._bracket_reason({**bracket, "plain_drift": 0.01, "harness_cv": 0.05}) == \
        "neither: not explained by this measurement"
    assert runs._bracket_reason({**bracket, "ratio_mean": 1.02}) == ""


CELL = r"(?<!\\)\|"  # a cell boundary: a pipe that is not escaped
HOSTILE_CHECK = "shape|ok | fake | row |\n\n## heading\n" + "c" * 500  # what a candidate's report can name


def _table_rows(text: str, header_start: str) -> list[list[str]]:
    """The rows of the markdown table whose header line starts with ``header_start``, split into cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(re.split(CELL, line)[1:-1])
    return table


def test_a_candidate_s_check_name_stays_in_its_table_cell(tmp_path):
    """Both fidelity reports put the verdict's check name in a table: a pipe or a newline in it would end
    the row or the table, so it is escaped, put on one line and cut."""
    with benchmark_module("fidelity") as fidelity:
        pass
    local = {"task_1.py": {"task": "smoke/1", "category": "incorrect", "check": HOSTILE_CHECK, "runtime_ms": None}}
    queue = {"task_1.py": {"task": "smoke/1", "category": "incorrect", "check": "values", "runtime_ms": None}}
    rows, summary = fidelity.compare(local, queue)
    setup = {"suite": "smoke", "device": "cpu", "protocol": "robust", "gpu": None, "cpu": "a CPU", "solutions": "s",
             "date": "today", "isolation": {"local": "x", "queue": "y"}}
    table = _table_rows(fidelity.markdown(rows, summary, setup), "| file |")
    assert [len(row) for row in table] == [7, 7, 7]
    cell = table[2][2].strip()
    assert cell.startswith("incorrect/shape\\|ok \\| fake \\| row \\| ## heading") and cell.endswith("…")
    assert len(cell) < 140 and table[2][3].strip() == "incorrect/values **(differs)**"

    with benchmark_module("fidelity_runs") as runs:
        pass
    state = runs.State(tmp_path / "state")
    state.add({"key": "harness|pike|one|task_1.py", "kind": "harness", "task": 1, "category": "incorrect",
               "check": HOSTILE_CHECK})
    state.add({"key": "plain|1", "kind": "plain", "task": 1, "verdict": "wrong|\nanswer"})
    task = type("Task", (), {"id": 1, "name": "1_Linear"})()
    comparison = runs.compare([(task, Path("task_1.py"))], state, "pike", "one")
    setup = {"gpu": "none", "date": "today", "tasks": 1, "solutions": "s", "suite": "smoke", "torch": "2",
             "triton": "3", "device": "cpu", "warmup_ms": 5, "rep_ms": 20, "repeats": 1}
    table = _table_rows(runs.markdown([comparison], setup), "| task |")
    assert [len(row) for row in table] == [12, 12, 12]
    assert table[2][1].strip().startswith("incorrect/shape\\|ok \\| fake") and table[2][2].strip() == "wrong\\| answer"
