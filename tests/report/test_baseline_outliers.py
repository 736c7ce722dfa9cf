"""A baseline that disagrees wildly with its own seed group is flagged and kept out of the headline.

The fixture is the demo's case: smoke/2's eager baseline timed at 8.0 ms in one seed against 0.022 ms in
the other, which alone made a 257x task speedup and the headline.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from pike_harness.testing import invoke

from .handmade import HandRun


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("outliers")
    for seed, baseline_2 in ((0, 0.022), (1, 8.0)):
        run = HandRun(root / "runs", f"demo_s{seed}", seed=seed).task(1, "1_One").task(2, "2_Two")
        run.baseline(1, 6.0 + seed).baseline(2, baseline_2)
        run.attempt(1, 1, "correct", 3.0).attempt(2, 1, "correct", 0.031)
        run.write()
    result = invoke("report", "--input", str(root / "runs"), "--output", str(root / "report"),
                    "--format", "html", "--json")
    assert result.exit_code == 0, result.output
    return root / "report", result.output


def test_the_outlier_is_said_on_the_terminal_and_in_the_page(report):
    out, output = report
    line = ("run demo_s1: hand/2's eager baseline (8 ms) is 363.6x the same task's in seed demo_s0 (0.022 ms): "
            "kept out of the scores and the headline until re-timed")
    assert line in output
    page = html.unescape((out / "index.html").read_text())
    assert line in page and 'id="baseline-outliers"' in page
    assert "demo_s0: hand/2" not in output  # the fast seed is the reference, not flagged


def test_the_outlier_is_kept_out_of_the_scores(report):
    out, output = report
    summary = {r["run"]: r for r in json.loads(output[output.index("["):])}
    # demo_s1 scores on hand/1 alone (7.0 / 3.0), not on a 258x speedup of hand/2.
    assert summary["demo_s1"]["n_with_baseline"] == 1 and summary["demo_s1"]["score"] == pytest.approx(7.0 / 3.0)
    assert summary["demo_s0"]["n_with_baseline"] == 2  # its 0.022 ms baseline stands (the attempt is slower)
    con = duckdb.connect(str(out / "report.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT run, task, ratio > 5 FROM baseline_outliers").fetchall() == [
            ("demo_s1", "hand/2", True)]
    finally:
        con.close()


def test_a_noisy_but_sane_seed_group_flags_nothing(tmp_path):
    for seed, ms in ((0, 1.0), (1, 3.5)):  # 3.5x apart: noisy, within the factor of 5
        HandRun(tmp_path / "runs", f"s{seed}", seed=seed).task(1, "1_One").baseline(1, ms).attempt(
            1, 1, "correct", 0.5).write()
    result = invoke("report", "--input", str(tmp_path / "runs"), "--output", str(tmp_path / "r"), "--format", "csv")
    assert result.exit_code == 0, result.output
    assert "eager baseline" not in result.output


def test_outlier_factor_0_keeps_every_baseline_as_pike_does(report, tmp_path):
    out, _ = report
    shutil.copy(out / "report.duckdb", tmp_path / "copy.duckdb")
    con = duckdb.connect(str(tmp_path / "copy.duckdb"))  # params is the one table a reader changes
    try:
        con.execute("UPDATE params SET outlier_factor = 0")
        assert con.execute("SELECT count(*) FROM baseline_outliers").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM task_baselines WHERE run = 'demo_s1'").fetchone() == (2,)
    finally:
        con.close()
