"""``fidelity.py --interleaved``: the figures from a state of rounds, and the CPU path end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from perf_helpers import SMOKE, benchmark_module

REPO = Path(__file__).resolve().parents[2]


def _paired(pairs: list[list[float]], flagged: str | None = None, speedup: float = 2.0) -> dict:
    return {"pairs": pairs, "flagged": flagged, "noise": {"steal_fraction": 0.01}, "speedup": speedup}


def test_rows_pool_rounds_and_judge_the_harness_against_the_plain_interval(tmp_path):
    with benchmark_module("fidelity_interleaved") as interleaved, benchmark_module("perf_common") as common:
        state = common.JsonlState(tmp_path, interleaved.STATE_FILE)
        task = SMOKE.task(1)
        for round_no, (eager, solution) in enumerate([([2.0, 2.1], [1.0, 1.0]), ([2.2, 1.9], [1.1, 0.95])], 1):
            state.add({"key": f"plain|{round_no}|1", "verdict": "correct", "eager_ms": eager,
                       "solution_ms": solution})
            state.add({"key": f"harness|{round_no}|1", "category": "correct", "mean_ms": 1.1,
                       "flags": ["noisy_timing"] if round_no == 2 else [],
                       "noise": {"canary_before_ms": 0.01, "canary_after_ms": 0.03, "steal_fraction": 0.0},
                       "paired": _paired([[2.0, 1.0], [2.04, 1.0]], "wide" if round_no == 2 else None,
                                         speedup=2.0 if round_no == 1 else 2.5)})
        row = interleaved.task_row(task, Path("1_MatmulReLU.py"), state, rounds=2)
    assert row["plain"]["n"] == 4 and row["harness"]["n"] == 4  # every timing pair of every round
    assert row["plain"]["low"] < 2.0 < row["plain"]["high"]
    assert row["harness"]["speedup"] == pytest.approx((2.0 * 2.04) ** 0.5)
    assert row["within_plain_ci"] is True
    assert row["search_ratio"] == pytest.approx(1.1 / (1.0 * 1.0 * 1.1 * 0.95) ** 0.25)
    assert row["canary_ms"] == pytest.approx(0.02) and row["max_steal"] == pytest.approx(0.01)
    assert row["flags"] == ["noisy_timing"] and row["paired_flagged"] == ["wide"]
    # each round's own speedup, and how far the rounds lie apart on each side
    assert row["plain_by_round"] == pytest.approx([(2.0 * 2.1) ** 0.5, 2.0])
    assert row["harness_by_round"] == [2.0, 2.5]
    assert row["plain_round_spread"] == pytest.approx((2.0 * 2.1) ** 0.5 / 2.0)
    assert row["harness_round_spread"] == pytest.approx(1.25)
    summary = interleaved.summarize([row])
    assert summary["timed_both"] == 1 and summary["within_plain_ci"] == 1 and summary["noisy_tasks"] == 1
    assert summary["median_round_spread_harness"] == pytest.approx(1.25)
    assert summary["median_halfwidth_plain"] == pytest.approx(row["plain"]["halfwidth"])
    assert summary["geomean_ratio"] == pytest.approx(row["harness"]["speedup"] / row["plain"]["speedup"])


@pytest.mark.slow
@pytest.mark.timeout(3000)  # the two runs' timeouts below, and more
def test_the_cpu_path_runs_both_sides_in_rounds_and_writes_the_report(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, str(REPO / "benchmarks" / "fidelity.py"), "--interleaved", "--device", "cpu",
               "--suite", "smoke", "--solutions", str(REPO / "tasks" / "smoke"), "--tasks", "1", "--rounds", "2",
               "--plain-repeats", "2", "--warmup-ms", "2", "--rep-ms", "10", "--block-ms", "5", "--min-pairs", "3",
               "--max-pairs", "3", "--warm-jobs", "1", "--out", str(out), "--workdir", str(tmp_path / "work"),
               "--budget-s", "1800"]  # far above need: a loaded runner must not end the rounds at the budget
    env = {"PYTHONPATH": f"{REPO / 'src'}:{REPO / 'plugins'}", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=2000, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    payload = json.loads((out / "fidelity-interleaved.json").read_text())
    (row,) = payload["rows"]
    assert row["plain_rounds"] == 2 and row["harness_rounds"] == 2
    # 2 rounds x 3 pairs, pooled: --min-pairs equals --max-pairs, so no round may stop early on a
    # narrow interval (with 2 pairs allowed, one did on a CI runner: n was 5)
    assert row["plain"]["n"] == 4 and row["harness"]["n"] == 6
    assert row["within_plain_ci"] in (True, False) and row["canary_ms"] > 0
    assert (out / "reports" / "fidelity-interleaved-cpu.md").exists()
    rows = [json.loads(line) for line in (out / "interleaved.jsonl").read_text().splitlines()]
    # both sides' caches filled before round 1 (--warm-jobs 0 would skip both)
    warmed = [r for r in rows if r["kind"] == "harnesswarm"]
    assert len(warmed) == 1 and warmed[0]["category"] == "correct" and warmed[0]["cache"]
    assert sum(1 for r in rows if r["kind"] == "plainwarm") == 1
    assert [r["key"] for r in rows if not r["kind"].endswith("warm")] == [
        "plain|1|1", "harness|1|1", "plain|2|1", "harness|2|1"]  # alternating
    # --report-only rebuilds the same figures from the state without measuring anything more
    before = (out / "interleaved.jsonl").read_text()
    again = subprocess.run([*command, "--report-only"], capture_output=True, text=True, timeout=600, env=env,
                           cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert (out / "interleaved.jsonl").read_text() == before
    assert json.loads((out / "fidelity-interleaved.json").read_text())["rows"] == payload["rows"]
