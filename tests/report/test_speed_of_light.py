"""Speed of light: FLOP and byte counts of smoke tasks against hand-computed values, the bound and its
fraction, `pikeh tasks show`'s line, and the report's SoL table, figure and attempt_sol view."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from pike_harness.cli import App
from pike_harness.host import speed_of_light as sol

from .handmade import HandRun

H100 = "NVIDIA H100 80GB HBM3"
TASKS = Path(__file__).resolve().parents[2] / "tasks" / "smoke"

# Hand counts. smoke/1: x[128,512] @ W[512,512]^T -> 2*128*512*512 FLOPs; 128*512 + 512*512 + 128*512 floats.
# smoke/2 (softmax): no matmul FLOPs; 64*256 floats in and out. smoke/6: three linears 256->512->512->10 on a
# batch of 64: 2*64*(256*512 + 512*512 + 512*10) FLOPs; floats: x, the three weights and biases, the output.
MATMUL_FLOPS = 2 * 128 * 512 * 512
MATMUL_FLOATS = 128 * 512 + 512 * 512 + 128 * 512
SOFTMAX_FLOATS = 2 * 64 * 256
MLP_FLOPS = 2 * 64 * (256 * 512 + 512 * 512 + 512 * 10)
MLP_FLOATS = 64 * 256 + (256 * 512 + 512) + (512 * 512 + 512) + (512 * 10 + 10) + 64 * 10


@pytest.fixture(scope="module")
def sol_table_run(tmp_path_factory) -> tuple[Path, list[dict]]:
    """benchmarks/sol_table.py on smoke/1, 2 and 6 (one counting process), with a peak table for any
    device (1 TFLOP/s fp32, 2 fp16, 10 GB/s) and a baseline set: eager 0.5 ms, compile 0.25 ms on smoke/1."""
    tmp_path = tmp_path_factory.mktemp("sol")
    sys.path.insert(0, str(TASKS.parents[1] / "benchmarks"))
    try:
        import sol_table
    finally:
        sys.path.pop(0)
    peaks = tmp_path / "peaks.toml"
    peaks.write_text('[[device]]\nmatch = "."\nname = "any cpu"\nfp32 = 1.0\ntf32 = 1.0\nbf16 = 2.0\nfp16 = 2.0\n'
                     'bandwidth_gbs = 10.0\n')
    baselines = tmp_path / "set"
    baselines.mkdir()
    events = [{"type": "baseline", "task": "smoke/1", "mode": mode, "result": {"category": "correct", "runtime_ms": ms}}
              for mode, ms in (("eager", 0.5), ("compile", 0.25))]
    (baselines / "baselines.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "out"
    assert sol_table.main(["--suite", "smoke", "--tasks", "1,2,6", "--device", "cpu", "--device-name", "Test CPU",
                           "--output-dir", str(out), "--baselines", str(baselines), "--peaks", str(peaks),
                           "--no-microbench"]) == 0
    return out / "sol-smoke-test-cpu.md", json.loads((out / "sol-smoke-test-cpu.json").read_text())["tasks"]


def test_flop_and_byte_counts_match_hand_counts(sol_table_run):
    matmul, softmax, mlp = sol_table_run[1]
    assert [r["precision"] for r in sol_table_run[1]] == ["fp16", "fp32", "fp16"]
    assert matmul["flops"] == MATMUL_FLOPS and matmul["bytes"] == 2 * MATMUL_FLOATS  # fp16: 2 bytes a float
    assert matmul["bytes_by_part"] == {"inputs": 2 * 128 * 512, "state": 2 * 512 * 512, "outputs": 2 * 128 * 512}
    assert softmax["flops"] == 0 and softmax["bytes"] == 4 * SOFTMAX_FLOATS
    assert mlp["flops"] == MLP_FLOPS and mlp["bytes"] == 2 * MLP_FLOATS
    assert matmul["counted_on"] == "meta"


def test_precision_the_tolerance_allows():
    assert sol.bound_precision("fp32", "tolerance", 1e-2, 1e-2) == "fp16"  # level3-pike, smoke/1
    assert sol.bound_precision("fp32", "tolerance", 1e-5, 1e-3) == "fp32"  # smoke/2: too tight for 16 bits
    assert sol.bound_precision("fp32", "stated", 1e-2, 1e-2) == "fp32"
    assert sol.bound_precision("bf16", "stated", 1e-2, 1e-2) == "bf16"


def test_peak_lookup_bound_and_fraction(tmp_path):
    assert sol.find_peaks(H100).name == "H100 SXM"
    assert sol.find_peaks("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert sol.find_peaks("NVIDIA H200").bandwidth_gbs == 4800.0
    assert sol.find_peaks("NVIDIA A100-SXM4-80GB").name == "A100 80GB SXM"
    assert sol.find_peaks("NVIDIA A100-SXM4-40GB").name == "A100 40GB"
    assert sol.find_peaks("AMD Instinct MI300X").bf16 == 1307.4
    assert sol.find_peaks("Intel(R) Xeon(R) CPU") is None and sol.find_peaks(None) is None
    peaks = sol.find_peaks(H100)
    bound = sol.sol_ms(MATMUL_FLOPS, 2 * MATMUL_FLOATS, peaks, "fp16")
    assert bound["compute_ms"] == pytest.approx(MATMUL_FLOPS / 989.4e12 * 1e3)
    assert bound["memory_ms"] == pytest.approx(2 * MATMUL_FLOATS / 3.35e12 * 1e3)
    assert bound["sol_ms"] == bound["memory_ms"] and bound["bound"] == "memory"
    # At fp32 rates the same matmul is compute-bound: 67 TFLOP/s.
    assert sol.sol_ms(MATMUL_FLOPS, 4 * MATMUL_FLOATS, peaks, "fp32")["bound"] == "compute"
    assert sol.fraction(0.25, 1.0) == 0.25 and sol.fraction(None, 1.0) is None and sol.fraction(0.25, None) is None
    table = tmp_path / "peaks.toml"
    table.write_text('[[device]]\nmatch = "Test CPU"\nname = "test cpu"\nfp32 = 1.0\ntf32 = 1.0\nbf16 = 2.0\n'
                     'fp16 = 2.0\nbandwidth_gbs = 10.0\n')
    extra = sol.load_peaks([table])
    assert sol.find_peaks("Test CPU 9000", extra).bandwidth_gbs == 10.0
    bad = tmp_path / "bad.toml"
    bad.write_text('[[device]]\nmatch = "x"\n')
    with pytest.raises(sol.UserError, match="bad.toml"):
        sol.load_peaks([bad])


def test_tasks_show_prints_the_bound(cli):
    result = cli("tasks", "show", "smoke/1", "--no-bound")
    assert "speed of light" not in result.output
    shown = cli("tasks", "show", "smoke/6")  # this machine: no GPU, so no peak figures
    assert shown.exit_code == 0, shown.output
    assert "no peak figures for this device" in shown.output and "0.05099 GFLOP" in shown.output
    from pike_harness.cli.tasks_cmd import bound_line

    task = App().catalog.resolve("smoke/1")
    counts = {"flops": MATMUL_FLOPS, "bytes": 2 * MATMUL_FLOATS, "bytes_per_float": 2}
    line = bound_line({**sol.task_bound(task, counts, sol.find_peaks(H100)), "device_name": H100})
    assert line.startswith(f"speed of light on {H100} (H100 SXM datasheet peaks): 0.0002348 ms, memory-bound")


def _clocks(sm: float, mem: float = 2619.0) -> dict:
    reading = {"sm_mhz": sm, "mem_mhz": mem, "power_limit_w": 700.0, "temperature_c": 40.0}
    return {"before": reading, "after": reading}


def test_report_sol_table_figure_and_clock_flags(cli, tmp_path):
    """A run timed on an H100 (so the datasheet peaks apply): eager 1 ms, compile 0.8 ms, best 0.5 ms on
    smoke/1; one correct attempt timed at 1500 MHz against the baseline's 1980 MHz is flagged, one at
    1950 MHz (1.5% off) is not."""
    App.reset()
    run = HandRun(tmp_path / "runs", "h100-run", suite="smoke").task(1, "1_MatmulReLU")
    run.baseline(1, 1.0, device_name=H100).baseline(1, 0.8, mode="compile", device_name=H100)
    run.attempt(1, 1, "correct", 0.9, device_name=H100).attempt(1, 2, "correct", 0.5, device_name=H100)
    clocks = iter([_clocks(1980.0), _clocks(1980.0), _clocks(1500.0), _clocks(1950.0)])
    for event in run.events:
        if event["type"] in ("baseline", "eval"):
            event["result"]["environment"]["gpu_clocks"] = next(clocks)
    path = run.write()
    meta = json.loads((path / "run.json").read_text())
    meta["environment"]["gpu"] = H100
    (path / "run.json").write_text(json.dumps(meta))
    out = tmp_path / "report"
    result = cli("report", "--input", str(path), "--output", str(out), "--format", "html,csv")
    assert result.exit_code == 0, result.output
    (row,) = list(csv.DictReader((out / "sol.csv").open()))
    sol_ms = 2 * MATMUL_FLOATS / 3.35e12 * 1e3  # memory-bound at fp16 on an H100 SXM
    assert float(row["sol_ms"]) == pytest.approx(sol_ms)
    assert float(row["eager_fraction"]) == pytest.approx(sol_ms / 1.0)
    assert float(row["compile_fraction"]) == pytest.approx(sol_ms / 0.8)
    assert float(row["best_fraction"]) == pytest.approx(sol_ms / 0.5)
    assert row["device"] == "H100 SXM" and row["precision"] == "fp16" and row["bound"] == "memory"
    page = (out / "index.html").read_text()
    assert 'id="fig-sol"' in page and 'id="speed-of-light"' in page
    assert '"percent"' in page  # the figure's data travels in the page
    import duckdb

    con = duckdb.connect(str(out / "report.duckdb"), read_only=True)
    fractions = con.execute("SELECT key, sol_fraction FROM attempt_sol ORDER BY key").fetchall()
    con.close()
    assert fractions == [("q001", pytest.approx(sol_ms / 0.9)), ("q002", pytest.approx(sol_ms / 0.5))]
    # Clocks: q001 ran at 1500 MHz (24% below the baseline's 1980): flagged; q002 at 1950 (1.5%): not.
    assert 'id="gpu-clocks"' in page and "sm clock 1500 MHz vs baseline 1980 MHz" in page
    assert "q002" not in page.split('id="gpu-clocks"')[1].split("</table>")[0]
    assert "timed at GPU clocks more than 5%" in result.output


def test_sol_table_script_on_cpu(sol_table_run):
    """smoke/1's bound on the test peaks is the memory side, 786432 bytes / 10 GB/s = 0.0786 ms."""
    sys.path.insert(0, str(TASKS.parents[1] / "benchmarks"))
    try:
        import sol_table
    finally:
        sys.path.pop(0)
    table = sol_table_run[0].read_text()
    sol_ms = 2 * MATMUL_FLOATS / 10e9 * 1e3
    row = next(line for line in table.splitlines() if line.startswith("| smoke/1"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:6] == ["fp16", "0.06711", "0.7864", f"{sol_ms:.4g}", "memory"]
    assert cells[8] == f"{sol_ms / 0.5 * 100:.3g}%" and cells[10] == f"{sol_ms / 0.25 * 100:.3g}%"
    assert sol_table.measured_sol_ms(MATMUL_FLOPS, 1e6, "fp16", {"matmul_tflops": {"fp32": 1.0}, "copy_gbs": 100.0}) \
        == pytest.approx(max(MATMUL_FLOPS / 1e12, 1e6 / 100e9) * 1e3)
