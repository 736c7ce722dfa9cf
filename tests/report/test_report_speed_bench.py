"""benchmarks/report_speed.py's comparison of two reports: the page's generation time is ignored, any
other difference and any file only one side wrote are named."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_two_reports_differ_only_where_they_should(tmp_path: Path):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import report_speed
    finally:
        sys.path.pop(0)
    a, b = tmp_path / "a", tmp_path / "b"
    for side, stamp, score in ((a, "2026-11-28 09:00:01", "2.0"), (b, "2026-11-28 09:03:59", "2.0")):
        side.mkdir()
        (side / "index.html").write_text(f"<p>generated {stamp}</p><td>{score}</td>")
        (side / "summary.csv").write_text(f"run,score\nA,{score}\n")
        (side / "report.duckdb").write_bytes(stamp.encode())  # its own pages differ: never compared
    assert report_speed.differing_files(a, b) == []
    (b / "summary.csv").write_text("run,score\nA,2.5\n")
    (b / "fast_p.svg").write_text("<svg/>")
    (b / "index.html").write_text("<p>generated 2026-11-28 09:03:59</p><td>2.5</td>")
    assert report_speed.differing_files(a, b) == ["fast_p.svg", "index.html", "summary.csv"]
