"""``benchmarks/diag_gpu_clock.py``: the sampler's lines, the join of samples to windows, the fast/slow
split, and the CPU path end to end (no sampler there), so that its GPU call cannot fail on a bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from perf_helpers import benchmark_module, solutions_folder

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "diag_gpu_clock.py"
ENV = {"PYTHONPATH": f"{REPO / 'src'}:{REPO / 'plugins'}", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}


def _stamp(when: float) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(when)) + f".{round((when % 1) * 1000):03d}"


def test_samples_parse_and_land_in_the_window_they_were_taken_in():
    base = float(int(time.time()))  # whole seconds, so the fraction written is exact
    text = "\n".join([
        f"{_stamp(base + 0.010)}, 1980, 300.5, 40, 0x0000000000000000",
        f"{_stamp(base + 0.050)}, 1755, 650.0, 44, 0x0000000000000004",  # sw power cap
        "not, a, sample",
        f"{_stamp(base + 0.150)}, 1980, 200.0, 41, 0x0000000000000001",
    ])
    with benchmark_module("diag_gpu_clock") as diag:
        samples = diag.parse_samples(text)
        assert [s["sm_mhz"] for s in samples] == [1980.0, 1755.0, 1980.0]
        assert samples[1]["t"] == pytest.approx(base + 0.050, abs=1e-6)
        windows = [{"t0": base, "t1": base + 0.1}, {"t0": base + 0.1, "t1": base + 0.2}, {"t0": base + 5, "t1": base + 6}]
        diag.join(windows, samples)
    first, second, empty = windows
    assert first["samples"] == 2 and first["sm_mhz"] == pytest.approx((1980 + 1755) / 2)
    assert first["power_w"] == 650.0 and first["reasons"] == ["sw_power_cap"]
    assert second["reasons"] == ["idle"] and second["temperature_c"] == 41.0
    assert empty["samples"] == 0 and "sm_mhz" not in empty


FAKE_SMI = """#!/usr/bin/env python3
import signal, sys, time
if "--loop-ms=20" not in sys.argv:
    sys.exit(0 if "--query-gpu=clocks_event_reasons.active" in sys.argv else 6)

def stop(*_):
    print("stopped", flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, stop)
while True:
    t = time.time()
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1) * 1000)
    print(stamp + ", 1755, 650.00, 44, 0x0000000000000004", flush=True)
    time.sleep(0.02)
"""


def test_the_sampler_writes_every_line_and_stops(tmp_path, monkeypatch):
    """A stand-in ``nvidia-smi`` (no GPU here) that prints a sample every 20 ms until it is stopped: what
    it printed reaches the log, parses, and it ends on the stop's signal (its last line and its exit
    status show it saw the signal, not the kill that follows a stop it ignored)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    log = tmp_path / "smi.csv"
    with benchmark_module("diag_gpu_clock") as diag:
        assert diag.reasons_field() == "clocks_event_reasons.active"
        sampler = diag.start_sampler(0, log)
        assert sampler is not None
        deadline = time.monotonic() + 120  # generous: only the count of lines matters, not the rate
        while len(diag.parse_samples(log.read_text())) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        diag.stop_sampler(sampler, grace_s=120)  # a loaded runner may take its time to run the handler
        samples = diag.parse_samples(log.read_text())
    assert sampler.returncode == 0
    assert len(samples) >= 3 and log.read_text().rstrip().endswith("stopped")  # a line cut by the stop may precede it
    assert {(s["sm_mhz"], s["power_w"], s["reasons"]) for s in samples} == {(1755.0, 650.0, 4)}


def test_windows_split_into_fast_and_slow_by_the_sides_fastest():
    def w(phase: str, side: str, ms: float, sm: float, enqueue: float) -> dict:
        return {"phase": phase, "side": side, "ms": ms, "sm_mhz": sm, "power_w": 600.0, "enqueue_ms": enqueue,
                "reasons": ["sw_power_cap"] if sm < 1900 else []}

    windows = [w("alone", "solution", 1.0, 1980, 0.1), w("alone", "solution", 1.02, 1970, 0.1),
               w("alternating", "solution", 1.12, 1760, 0.1), w("alternating", "solution", 1.01, 1980, 0.1),
               w("alternating", "eager", 5.0, 1980, 0.2)]
    with benchmark_module("diag_gpu_clock") as diag:
        rows = {(s["side"], s["phase"]): s for s in diag.summarise(14, windows)}
        text = diag.markdown(list(rows.values()), {"device": "cuda:0", "date": "today", "window_ms": 100.0, "windows": 2})
    alone, mixed = rows[("solution", "alone")], rows[("solution", "alternating")]
    assert (alone["slow"], alone["sm_slow"], alone["sm_fast"]) == (0, None, pytest.approx(1975.0))
    assert (mixed["slow"], mixed["sm_slow"], mixed["sm_fast"]) == (1, 1760.0, 1980.0)
    assert mixed["reasons_slow"] == ["sw_power_cap"] and mixed["reasons_fast"] == []
    assert mixed["median_ms"] == pytest.approx(1.065) and mixed["fastest_ms"] == 1.0
    assert rows[("eager", "alternating")]["slow"] == 0
    assert "| 14 | solution | alternating | 2 | 1 |" in text and "1980 / 1760" in text


def test_the_cpu_path_times_every_phase(tmp_path):
    solutions = solutions_folder(tmp_path)
    out = tmp_path / "out"
    command = [sys.executable, str(SCRIPT), "--device", "cpu", "--suite", "smoke", "--solutions", str(solutions),
               "--tasks", "1", "--windows", "2", "--window-ms", "5", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    payload = json.loads((out / "diag_gpu_clock.json").read_text())
    windows = payload["rows"][0]["windows"]
    phases = [(w["phase"], w["side"]) for w in windows]
    assert phases == [("alone", "solution")] * 2 + [("alternating", "eager"), ("alternating", "solution")] * 2 + \
        [("alone_again", "solution")] * 2 + [("alone", "eager")]
    assert all(w["ms"] > 0 and w["enqueue_ms"] > 0 and w["samples"] == 0 for w in windows)
    assert {(s["side"], s["phase"]) for s in payload["summaries"]} == {
        ("solution", "alone"), ("solution", "alternating"), ("solution", "alone_again"),
        ("eager", "alternating"), ("eager", "alone")}
    assert "| 1 | solution | alone | 2 |" in (out / "diag_gpu_clock.md").read_text()


def test_solutions_are_required(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--device", "cpu", "--out", str(tmp_path / "out")])
    with benchmark_module("diag_gpu_clock") as diag, pytest.raises(SystemExit, match="--solutions is required"):
        diag.main()
    assert not (tmp_path / "out").exists()
