"""Profiles on a CPU (`pikeh profile` through the real local evaluator; the report side of `pikeh report
--profile-best` with the fake evaluator), and GPU-clock readings: absent without a GPU, never an error;
the >5% drift rule on synthetic readings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pike_harness.api import sha256
from pike_harness.cli import App
from pike_harness.testing import default_verdict, fake_evaluator_plugin, invoke
from pike_harness.worker.inside.profiling import classify
from pike_harness.worker.supervise import gpu_clocks

from .handmade import HandRun
from .test_retime import GELU


def test_clock_readings_are_absent_without_a_gpu():
    assert gpu_clocks.read(None) is None and gpu_clocks.read("") is None
    assert gpu_clocks.read("GPU-1a2b") is None  # a UUID is not resolved
    if gpu_clocks._library() is False and not gpu_clocks.shutil.which("nvidia-smi"):
        assert gpu_clocks.read("0") is None  # this CI machine: no NVML, no nvidia-smi


def test_nvidia_smi_line_and_drift_rule():
    reading = gpu_clocks.parse_smi("1980, 2619, 700.00, 40")
    assert reading == {"sm_mhz": 1980.0, "mem_mhz": 2619.0, "power_limit_w": 700.0, "temperature_c": 40.0}
    assert gpu_clocks.parse_smi("[N/A], 2619, [N/A], 40") == {"mem_mhz": 2619.0, "temperature_c": 40.0}
    assert gpu_clocks.parse_smi("garbage") is None

    def clocks(sm_before, sm_after, mem=2619.0):
        return {"before": {"sm_mhz": sm_before, "mem_mhz": mem}, "after": {"sm_mhz": sm_after, "mem_mhz": mem}}

    base = clocks(1980, 1980)
    assert gpu_clocks.drift(clocks(1900, 1900), base) == []  # 4% below: within 5%
    assert gpu_clocks.drift(clocks(1980, 1700), base) == ["sm clock 1840 MHz vs baseline 1980 MHz"]  # mean 7% off
    assert gpu_clocks.drift(clocks(1980, 1980, mem=1593.0), base) == ["mem clock 1593 MHz vs baseline 2619 MHz"]
    assert gpu_clocks.drift(None, base) == [] and gpu_clocks.drift(base, None) == []  # CPU side: no flag
    assert gpu_clocks.drift(clocks(1980, 1700), base, threshold=0.10) == []


def test_kernel_origins():
    assert classify("triton_poi_fused_add_relu_0") == "custom"
    assert classify("fused_gemm_relu_kernel") == "custom"  # a load_inline kernel that mentions gemm
    assert classify("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32") == "library"
    assert classify("ampere_sgemm_128x64_tn") == "library"
    assert classify("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>") == "library"
    assert classify("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>") == "pytorch"
    assert classify("aten::gelu") == "pytorch"
    assert classify("Memcpy DtoD (Device -> Device)") == "memory"


@pytest.fixture
def gelu_file(tmp_path: Path) -> Path:
    path = tmp_path / "gelu.py"
    path.write_text(GELU)
    return path


def test_pikeh_profile_on_cpu(cli, gelu_file):
    App.reset()
    # --prestart 0: one sandbox for the one candidate, no idle pool started beside it
    result = cli("profile", str(gelu_file), "--task", "smoke/5", "--device", "cpu", "--protocol", "quick",
                 "--prestart", "0", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output[result.output.index("{"):])
    profile = record["profile"]
    assert profile["device"] == "cpu" and profile["unit"] == "operator" and profile["calls"] == 5
    names = {k["name"]: k for k in profile["kernels"]}
    assert names["aten::gelu"]["origin"] == "pytorch" and names["aten::gelu"]["per_call"] == 1
    assert profile["launches_per_call"] >= 1 and profile["share"]["pytorch"] == pytest.approx(1.0)
    assert 0 <= profile["gap_ms_per_call"] <= profile["wall_ms_per_call"]
    assert record["runtime_ms"] > 0
    assert "gpu_clocks" not in record["environment"]  # a CPU evaluation: absent, not an error


# What the worker's profiler reports for GELU on a CPU (the shape test_pikeh_profile_on_cpu checks for real).
CPU_GELU_PROFILE = {"device": "cpu", "unit": "operator", "calls": 5, "wall_ms_per_call": 0.05,
                    "busy_ms_per_call": 0.04, "gap_ms_per_call": 0.01, "share": {"pytorch": 1.0}, "n_kernels": 1,
                    "launches_per_call": 1.0,
                    "kernels": [{"name": "aten::gelu", "origin": "pytorch", "total_ms": 0.2, "ms_per_call": 0.04,
                                 "per_call": 1.0, "share": 1.0}]}


def test_report_profiles_the_best_candidate(tmp_path):
    """The report's side of --profile-best: which candidate is asked for, the profile stored and shown, and
    reused by a later report. The fake evaluator answers with a CPU profile; the real profiling through
    the sandbox is test_pikeh_profile_on_cpu's."""

    def verdict(request):
        result = default_verdict(request)
        return dataclasses.replace(result, profile=dict(CPU_GELU_PROFILE)) if request.profile else result

    run = HandRun(tmp_path / "runs", "smoke-run", suite="smoke").task(5, "5_GELU").baseline(5, 1.0)
    run.attempt(5, 1, "incorrect").attempt(5, 2, "correct", 0.5, code=GELU)
    path = run.write()
    out = tmp_path / "report"
    plugin = fake_evaluator_plugin(verdict)
    result = invoke("report", "--input", str(path), "--output", str(out), "--format", "html", "--profile-best", "1",
                    "--evaluator", "fake", plugins={"fake": plugin})
    assert result.exit_code == 0, result.output
    [asked] = plugin.built[0].requests
    assert asked.profile and asked.candidate_source == GELU  # the best correct candidate, q002
    (record,) = [json.loads(line) for line in (out / "profiles.jsonl").read_text().splitlines()]
    assert record["key"] == "q002" and record["profile"]["unit"] == "operator"
    page = (out / "index.html").read_text()
    section = page.split('id="profiles"')[1].split("</table>")[0]
    assert "aten::gelu [pytorch]" in section and "pytorch 100%" in section
    # A later report reuses the stored profile (no evaluator needed).
    again = invoke("report", "--input", str(path), "--output", str(out), "--format", "html")
    assert again.exit_code == 0 and 'id="profiles"' in (out / "index.html").read_text()
    assert len((out / "profiles.jsonl").read_text().splitlines()) == 1


def test_malformed_profile_records_are_shown_as_such_and_the_report_is_written(tmp_path):
    """profiles.jsonl stays in the report folder, and a forged profile (the candidate's process writes it)
    stayed there too: formatting it raised, and every later report in that folder failed."""
    run = HandRun(tmp_path / "runs", "smoke-run", suite="smoke").task(5, "5_GELU").baseline(5, 1.0)
    for index in range(1, 6):
        run.attempt(5, index, "correct", 0.5 + index)
    path = run.write()
    sha = {key: sha256(code) for (_, key, _), code in run.codes.items()}

    def record(key: str, profile: object, **fields: object) -> dict:
        return {"run": "smoke-run", "task": "smoke/5", "key": key, "code_sha256": sha[key], "runtime_ms": 1.0,
                "device": "cpu", "profile": profile, "time": "2026-01-01T00:00:00+0000", **fields}

    out = tmp_path / "report"
    out.mkdir()
    lines = [record("q001", {"launches_per_call": "x"}), record("q002", {"kernels": ["str"]}),
             record("q003", "<script>alert(1)</script>", runtime_ms="fast"),
             record("q004", {"error": "<b>bold</b>\x1b[2J"}), record("q005", dict(CPU_GELU_PROFILE)),
             {**record("q005", {}), "run": ["not", "text"]}]
    (out / "profiles.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + "[1, 2]\n")
    result = invoke("report", "--input", str(path), "--output", str(out), "--format", "html")
    assert result.exit_code == 0, result.output
    assert "1 profile record(s) without a run, task and code hash; left out" in result.output
    section = (out / "index.html").read_text().split('id="profiles"')[1].split("</table>")[0]
    rows = {row.split("</td>")[2].split(">")[-1]: row for row in section.split("<tr")[2:]}  # by attempt key
    assert sorted(rows) == ["q001", "q002", "q003", "q004", "q005"]
    assert all("malformed profile" in rows[key] for key in ("q001", "q002", "q003"))
    assert "<script>" not in section and "failed: &lt;b&gt;bold&lt;/b&gt;\\x1b[2J" in rows["q004"]
    assert "aten::gelu [pytorch]" in rows["q005"] and "malformed" not in rows["q005"]
