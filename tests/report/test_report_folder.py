"""A reused report folder holds one report: the earlier report's own files go, the user's stay."""

from __future__ import annotations

from pathlib import Path

from pike_harness.testing import invoke

from .handmade import HandRun


def test_a_reused_report_folder_keeps_no_stale_file(tmp_path: Path):
    run = HandRun(tmp_path / "runs", "one").task(1, "1_One")
    run.baseline(1, 6.0).attempt(1, 1, "correct", 3.0).write()
    out = tmp_path / "report"
    first = invoke("report", "--input", str(tmp_path / "runs"), "--output", str(out), "--format", "html,csv,svg")
    assert first.exit_code == 0, first.output
    assert f"open {out / 'index.html'}" in first.output
    earlier = {p.name for p in out.iterdir()}
    assert {"index.html", "summary.csv", "suite_score.svg"} <= earlier
    (out / "notes.txt").write_text("the user's own file\n")
    (out / "retime.jsonl").write_text("")  # not written by a plain report: never listed, never removed

    second = invoke("report", "--input", str(tmp_path / "runs"), "--output", str(out), "--format", "csv")
    assert second.exit_code == 0, second.output
    now = {p.name for p in out.iterdir()}
    assert "index.html" not in now and not any(n.endswith(".svg") for n in now)
    assert {"summary.csv", "report.duckdb", "notes.txt", "retime.jsonl"} <= now
    assert (out / "notes.txt").read_text() == "the user's own file\n"
    assert not second.output.splitlines()[-1].startswith("open ")  # no page to open (a tmp path may hold "open")
    listed = set((out / "pikeh-report-files.txt").read_text().split())
    assert listed == now - {"notes.txt", "retime.jsonl", "pikeh-report-files.txt"}
