"""``benchmarks/diag_process_speed.py``: its task list, its per-core analysis, its one-line mistakes, and
the CPU path end to end (a task with its solution, an ``N:eager`` self-pair and a harness variant, one
round), so that its GPU call cannot fail on a bug."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from perf_helpers import benchmark_module, solutions_folder

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "diag_process_speed.py"
ENV = {"PYTHONPATH": f"{REPO / 'src'}:{REPO / 'plugins'}", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
PAIRS = 2  # the fewest that give a paired interval; the plain process's blocks are as many pairs


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_tasks_name_a_number_and_whether_the_solution_takes_part():
    with benchmark_module("diag_process_speed") as diag:
        assert diag.parse_tasks("27, 30:eager,,26") == [(27, True), (30, False), (26, True)]
        with pytest.raises(SystemExit, match="the only qualifier is ':eager'"):
            diag.parse_tasks("27:solution")


def test_core_effect_tells_the_cores_own_slowness_from_the_processes():
    with benchmark_module("diag_process_speed") as diag:
        same_slow_core = diag.core_effect([{"0": 1.0, "1": 2.0}, {"0": 2.0, "1": 4.0}])  # core 1 twice as slow in both
        assert same_slow_core["core_share"] == pytest.approx(1.0)
        assert same_slow_core["slowest_over_fastest"] == pytest.approx(2.0)
        assert (same_slow_core["fastest"], same_slow_core["slowest"]) == ("0", "1")
        assert same_slow_core["residual_sd"] == pytest.approx(0.0, abs=1e-12)
        assert same_slow_core["within_sweep_spread"] == pytest.approx(2.0)
        swapped = diag.core_effect([{"0": 1.0, "1": 2.0}, {"0": 2.0, "1": 1.0}])  # a different core slow each time
        assert swapped["core_share"] == pytest.approx(0.0, abs=1e-12)
        assert diag.core_effect([{"0": 1.0, "1": 2.0}]) is None  # one process: nothing to compare across
        assert diag.spread([2.0, 1.0, None]) == pytest.approx(2.0) and diag.spread([1.0]) is None


@pytest.mark.parametrize("argv, message", [
    (["--variants", "stock,nope"], "--variants: unknown nope"),
    (["--tasks", "1:fast"], "the only qualifier is ':eager'"),
    (["--suite", "smoke", "--tasks", "1"], "no solution for task 1"),  # no --solutions for a task with one
])
def test_a_mistake_is_one_line(tmp_path, monkeypatch, capsys, argv, message):
    """The script's own ``main`` in this process: each mistake is found before any process starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *argv, "--device", "cpu", "--out", str(tmp_path / "out")])
    with benchmark_module("diag_process_speed") as diag, pytest.raises(SystemExit) as ended:
        diag.main()
    assert message in str(ended.value.code)
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_cpu_path_times_both_sides_the_self_pair_and_a_variant(tmp_path):
    solutions = solutions_folder(tmp_path)
    out = tmp_path / "out"
    command = [sys.executable, str(SCRIPT), "--device", "cpu", "--suite", "smoke", "--solutions", str(solutions),
               "--tasks", "1,2:eager", "--rounds", "1", "--block-ms", "5", "--warmup-ms", "2", "--rep-ms", "10",
               "--pairs", str(PAIRS), "--sweep-ms", "3", "--variants", "stock,no-police", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    payload = json.loads((out / "diag_process_speed.json").read_text())
    text = (out / "diag_process_speed.md").read_text()
    allowed = sorted(os.sched_getaffinity(0))  # the script's processes inherit this process's cores

    setup = payload["setup"]
    assert payload["benchmark"] == "diag_process_speed"
    assert (setup["device"], setup["rounds"], setup["pairs"], setup["tasks"]) == ("cpu", 1, PAIRS, "1,2:eager")
    assert setup["pin_core"] == (3 if 3 in allowed else allowed[-1])  # --pin-core 3 (the default), or the last core

    rows = payload["rows"]  # round 1 runs the plain process first, then each variant (ABBA over rounds)
    assert [(r["round"], r["task"], r["kind"], r.get("variant")) for r in rows] == [
        (1, 1, "plain", None), (1, 1, "harness", "stock"), (1, 1, "harness", "no-police"),
        (1, 2, "plain", None), (1, 2, "harness", "stock"), (1, 2, "harness", "no-police")]
    for row in (r for r in rows if r["kind"] == "plain"):
        assert "error" not in row, row
        assert row["cores"] == allowed and row["pin_core"] == setup["pin_core"] and row["gpu"] is None
        assert row["autotune"] == {} if row["task"] == 1 else "autotune" not in row  # no Triton on the CPU
        assert set(row["sides"]) == ({"eager", "solution"} if row["task"] == 1 else {"eager"})
        for side, reading in row["sides"].items():
            for key in ("unpinned_ms", "pinned_ms", "timed_ms"):
                assert _positive(reading[key]), (row["task"], side, key, reading)
            assert all(core in allowed for core in reading["unpinned_cores"]), reading
            assert set(reading["sweep_ms"]) == {str(core) for core in allowed}  # every core in turn
            assert all(_positive(v) for v in reading["sweep_ms"].values()), reading
            if row["task"] == 1:  # paired-length blocks alternate the two sides, in one process
                assert len(reading["blocks_ms"]) == PAIRS and all(_positive(v) for v in reading["blocks_ms"])
            else:  # the reference alone has nothing to alternate with
                assert "blocks_ms" not in reading
    for row in (r for r in rows if r["kind"] == "harness"):
        assert "error" not in row and row["category"] == "correct", row
        assert _positive(row["speedup"]) and _positive(row["ci"][0]) and row["ci"][0] <= row["ci"][1]
        assert _positive(row["effective_pairs"])
        assert all(_positive(v) for v in row["search_ms"].values())
        assert set(row["median_ms"]) == {"eager", "solution"} and all(_positive(v) for v in row["median_ms"].values())
        assert [len(row["blocks_ms"][side]) for side in ("eager", "solution")] == [PAIRS, PAIRS]
        assert all(_positive(v) for side in ("eager", "solution") for v in row["blocks_ms"][side])
        assert len(row["cores"]) in (0, PAIRS) and all(core in allowed for core in row["cores"])
        if row["variant"] == "no-police":  # the supervisor's policing really was skipped
            assert row["patched"] > 0
        else:
            assert row["patched"] is None

    summaries = {(s["task"], s["side"]): s for s in payload["summaries"]}
    assert set(summaries) == {(1, "eager"), (1, "solution"), (2, "eager")}
    for (task, side), s in summaries.items():
        assert s["processes"] == 1 and s["unpinned_spread"] is None and s["pinned_spread"] is None  # one round
        assert len(s["unpinned_ms"]) == len(s["pinned_ms"]) == 1 and len(s["harness_blocks_ms"]) == 1  # stock only
        for key in ("timed_over_do_bench", "harness_over_plain"):
            assert _positive(s[key]), (task, side, key)
        assert _positive(s["blocks_over_do_bench"]) if task == 1 else s["blocks_over_do_bench"] is None
        assert s["cores"] is None  # one sweep: no core effect across processes
        assert set(s["variants"]) == {"stock", "no-police"}
        assert all(_positive(v["over_plain"]) and len(v["blocks_ms"]) == 1 for v in s["variants"].values())

    selfs = {x["variant"]: x for x in payload["self_pairs"]}  # only 2:eager is paired with itself
    assert set(selfs) == {"stock", "no-police"} and all(x["task"] == 2 and x["runs"] == 1 for x in selfs.values())
    for x in selfs.values():
        assert x["hold_one"] in (0, 1)
        assert math.isfinite(x["median_off"]) and x["median_off"] >= 0 and _positive(x["median_halfwidth"])

    assert "## Where the speed is decided (cpu," in text
    assert "| 1 | solution | 1 |" in text and "| 2 | eager | 1 |" in text
    assert "| task | side | stock | no-police |" in text  # the variants' table
    assert "Self-pairs (the reference against itself" in text and "| 2 | no-police | 1 |" in text
    assert "| 1 | 2 | harness (no-police) |" in text
