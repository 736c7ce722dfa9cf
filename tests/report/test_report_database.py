"""`report.duckdb` read with SQL as a user would: its JSON columns are JSON objects, not text inside JSON,
and the report's "What was measured" block is filled from them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pike_harness.testing import invoke

from .handmade import HandRun


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report (HTML and its database) of a run that asked for ``--device auto`` and ran on the CPU."""
    root = tmp_path_factory.mktemp("measured")
    run = HandRun(root / "runs", "measured", device="auto", strategy_options={"num_branches": 4, "brainstorm": True})
    run.task(1, "1_One").baseline(1, 6.0).attempt(1, 1, "correct", 3.0).attempt(1, 2, "compile_error")
    run.write()
    result = invoke("report", "--input", str(root / "runs"), "--output", str(root / "report"), "--format", "html")
    assert result.exit_code == 0, result.output
    return root / "report"


def test_the_runs_json_columns_are_read_with_sql(out):
    con = duckdb.connect(str(out / "report.duckdb"), read_only=True)
    try:
        row = con.execute(
            "SELECT config->>'$.strategy', config->>'$.strategy_options.num_branches', environment->>'$.cpu', "
            "environment->>'$.torch', json_type(plugins), device, device_requested FROM runs").fetchone()
        meta_phase = con.execute("SELECT meta->>'$.phase' FROM attempts").fetchone()
        stats_n = con.execute("SELECT stats->>'$.n' FROM baselines").fetchone()
    finally:
        con.close()
    assert row == ("pike-b", "4", "Hand CPU", "2.13.0+cpu", "OBJECT", "cpu", "auto")
    assert meta_phase == ("0",) and stats_n == ("10",)


def test_what_was_measured_names_options_device_cpu_versions_and_protocol(out):
    page = (out / "index.html").read_text()
    block = page[page.index('id="configuration"'):page.index('id="figures"')]
    assert "pike-b (brainstorm=True, num_branches=4)" in block
    assert "cpu (asked: auto); no GPU; CPU: Hand CPU (2 cores)" in block
    assert "robust (median of 10-100 calls)" in block
    assert "torch 2.13.0+cpu" in block and "python 3.11.7" in block


def test_the_failure_tables_are_in_the_page_itself(out):
    """Readable without JavaScript: the rows are HTML, not filled in by a script."""
    page = (out / "index.html").read_text()
    assert "failures (1)" in page
    assert '<td class="reason">compile_error in q002</td>' in page


def test_run_json_records_the_versions_that_change_timings():
    """torch, its CUDA and triton: None where absent (a CPU build), never missing."""
    import torch

    from pike_harness.host.run_environment import environment_info

    class NoEvaluator:
        def describe(self) -> dict:
            return {}

    info = environment_info(NoEvaluator())  # type: ignore[arg-type]
    assert info["torch"] == torch.__version__ and info["cuda"] == torch.version.cuda
    assert "triton" in info
    # A host that has not imported torch (a fake, queue or Ray evaluator) reads the same two values
    # from torch's version file, and still has not imported torch afterwards.
    probe = ("import json, sys\nfrom pike_harness.host.run_environment import torch_build\n"
             "print(json.dumps([torch_build(), 'torch' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[torch.__version__, torch.version.cuda], False]
