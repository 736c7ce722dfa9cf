"""``benchmarks/diag_launch_overhead.py``: its figures from rounds, its helper processes, its seccomp
and policing switches, its one-line errors, and (slow) the CPU path end to end, so that its one GPU call cannot fail
on a bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from perf_helpers import benchmark_module

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "diag_launch_overhead.py"
ENV = {"PYTHONPATH": f"{REPO / 'src'}:{REPO / 'plugins'}", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}


def _state(pid: int) -> str | None:
    """The process's state letter (None when it is gone or a zombie: it no longer runs)."""
    with benchmark_module("diag_launch_overhead") as diag:
        state = diag.process_state(pid)
    return None if state in ("Z", "X") else state


def _helpers_left(marker: str) -> list[int]:
    """Live processes whose command line carries the helpers' code."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and _state(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_rows_are_medians_over_rounds_with_ratios_to_the_plain_loop():
    with benchmark_module("diag_launch_overhead") as diag:
        ref = "level3-pike/4"
        rounds = [
            {"plain": {ref: {"mean": 0.10, "median": 0.09}}, "loop": {ref: {"plain": 0.11, "loop": 0.20}},
             "harness": {ref: {"mean": 0.40, "median": 0.30}}, "no-seccomp": {ref: {"error": "boom"}}},
            {"plain": {ref: {"mean": 0.14, "median": 0.11}}, "loop": {ref: {"plain": 0.13, "loop": 0.22}},
             "harness": {ref: {"mean": 0.50, "median": 0.36}}, "no-seccomp": {ref: {"error": "boom again"}}},
            {"plain": {ref: {"mean": 0.12, "median": 0.10}}, "loop": {ref: {"plain": 0.12, "loop": 0.24}},
             "harness": {ref: {"mean": 0.45, "median": 0.33}}},  # the budget ended this round early
        ]
        rows = diag.rows_of(rounds, ["plain", "loop", "harness", "no-seccomp"], [ref])
        by = {(r["config"], r["stat"]): r for r in rows}
        assert by[("plain", "mean")]["median_ms"] == pytest.approx(0.12)
        assert by[("plain", "mean")]["ratio_to_plain"] == pytest.approx(1.0)
        assert by[("harness", "mean")]["ratio_to_plain"] == pytest.approx(0.45 / 0.12)
        assert by[("harness", "median")]["ratio_to_plain"] == pytest.approx(0.33 / 0.10)
        assert by[("loop", "do_bench")]["ratio_to_plain"] == pytest.approx(0.12 / 0.12)  # against the plain mean
        assert by[("loop", "timed")]["ratio_to_plain"] == pytest.approx(0.22 / 0.12)
        assert by[("loop", "timed")]["values"] == [0.20, 0.22, 0.24]
        failed = by[("no-seccomp", "-")]  # a configuration without a figure still shows, with its errors
        assert failed["median_ms"] is None and failed["errors"] == ["boom", "boom again"]
        setup = {"device_name": "cpu", "date": "2026-11-28", "rounds": 3, "rounds_done": 3, "warmup_ms": 1.0,
                 "rep_ms": 5.0, "helpers": 1, "seccomp_patched_calls": 2}
        text = diag.markdown(rows, setup)
        assert "| level3-pike/4 | harness | mean | 0.4500 | 3.750 |" in text and "errors: boom" in text


def test_helpers_hold_the_device_are_stopped_and_end():
    with benchmark_module("diag_launch_overhead") as diag:
        with diag.helpers(1, "cpu") as procs:  # one: each helper is a torch import
            pids = [proc.pid for proc in procs]
            assert all(_state(pid) in ("S", "R") for pid in pids)  # started, blocked on their pipe
            with diag.stopped(procs):
                assert all(_state(pid) == "T" for pid in pids)
            assert all(_state(pid) in ("S", "R") for pid in pids)
        assert all(_state(pid) is None for pid in pids) and all(proc.returncode == 0 for proc in procs)
        with pytest.raises(RuntimeError, match="did not start"), diag.helpers(1, "no-such-device"):
            pass  # a helper that dies before it is ready is an error, not a wait for ever


def test_seccomp_off_withholds_the_filter_then_puts_it_back():
    from pike_harness.worker.supervise import seccomp

    if not seccomp.supported():
        pytest.skip("no system-call filter for this architecture")
    with benchmark_module("diag_launch_overhead") as diag:
        counter = [0]
        with diag.seccomp_off(counter), seccomp.program_fd() as fd:
            assert fd is None
        assert counter[0] == 1
        with seccomp.program_fd() as fd:
            assert fd is not None and os.read(fd, 8)  # the filter is back for everything after


def test_police_off_skips_the_supervisors_rounds_but_not_an_abort_then_puts_them_back():
    import threading
    from types import SimpleNamespace

    from pike_harness.worker.supervise.supervisor import Evaluation

    original = Evaluation._police
    with benchmark_module("diag_launch_overhead") as diag:
        counter = [0]
        with diag.police_off(counter):
            Evaluation._police(SimpleNamespace(_aborted=threading.Event()))  # a round: skipped
            aborted = threading.Event()
            aborted.set()
            with pytest.raises(AttributeError, match="_kill"):  # an abort still reaches the real policing
                Evaluation._police(SimpleNamespace(popen=object(), _aborted=aborted))
        assert counter[0] == 1
    assert Evaluation._police is original


@pytest.mark.parametrize("argv, message", [
    (["--configs", "plain,nope"], "unknown configuration(s) nope"),
    (["--tasks", "level3-pike/999"], "has no task 999"),
    (["--tasks", "nosuite/3"], "does not exist"),
])
def test_a_mistake_is_one_line(tmp_path, monkeypatch, capsys, argv, message):
    """The script's own ``main`` in this process (its arguments are checked before anything starts, so
    no Python and torch start-up is needed per mistake; the slow test runs it as a process)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *argv, "--out", str(tmp_path)])
    with benchmark_module("diag_launch_overhead") as diag, pytest.raises(SystemExit) as ended:
        diag.main()
    assert ended.value.code == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and message in stderr.strip().splitlines()[-1]
    assert not (tmp_path / "diag_launch_overhead.json").exists()


@pytest.mark.slow
@pytest.mark.timeout(2400)  # the run's timeout below, and more
def test_the_cpu_path_times_every_configuration_and_leaves_no_helper(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, str(SCRIPT), "--device", "cpu", "--tasks", "4", "--rounds", "1", "--helpers", "1",
               "--warmup-ms", "1", "--rep-ms", "5", "--out", str(out), "--workdir", str(tmp_path / "work"),
               "--budget-s", "1800", "--batch", "1"]  # far above need: a loaded runner must not end it early
    done = subprocess.run(command, capture_output=True, text=True, timeout=2000, env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    payload = json.loads((out / "diag_launch_overhead.json").read_text())
    with benchmark_module("diag_launch_overhead") as diag:
        assert payload["setup"]["rounds_done"] == 1 and payload["setup"]["configs"] == list(diag.CONFIGS)
        helper_marker = diag.HELPER[:40]
    rows = payload["rows"]
    for config in payload["setup"]["configs"]:
        mine = [r for r in rows if r["config"] == config]
        if config == "batch-cores":  # the quiet rule's cores mode needs a GPU: a row with the one-line reason
            assert mine and all("--quiet-mode cores needs" in " ".join(r["errors"]) for r in mine), mine
            continue
        assert mine and all(r["median_ms"] and r["median_ms"] > 0 and not r["errors"] for r in mine), (config, mine)
    assert {r["stat"] for r in rows if r["config"] == "loop"} == {"do_bench", "timed"}
    assert all(r["audit_events"] for r in rows if r["config"] == "loop-hooks")
    assert all(r["canary_ms"] for r in rows if r["config"] in ("loop", "harness"))  # the probe, both sides
    assert payload["setup"]["seccomp_patched_calls"] > 0  # the filter was really withheld in no-seccomp
    assert payload["setup"]["police_skipped"] > 0  # and the policing really skipped in no-police
    assert "| level3-pike/4 | helpers-stopped | mean |" in (out / "diag_launch_overhead.md").read_text()
    assert not _helpers_left(helper_marker)  # every helper ended with the run
