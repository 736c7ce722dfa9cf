"""A corrupt line anywhere in a journal is named by its line number, skipped by `pikeh report` with a
warning, refused by a plain resume and moved aside by --repair-journal. Never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report.handmade import scenario_a  # noqa: E402

from pike_harness.host.journal_reading import scan_journal  # noqa: E402
from pike_harness.host.store import BAD_LINES_FILE, RunStore  # noqa: E402


def _corrupt(run_dir: Path, line: int, junk: bytes) -> bytes:
    path = run_dir / "journal.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    original = lines[line - 1]
    lines[line - 1] = original[:20] + junk + original[20:]
    path.write_bytes(b"".join(lines))
    return original


@pytest.mark.parametrize("junk", [b"\x00", b"\xff\xfe"], ids=["nul", "not-utf8"])
def test_report_skips_a_corrupt_line_with_its_number(tmp_path, cli, junk):
    run_dir = scenario_a(tmp_path / "runs")
    _corrupt(run_dir, 5, junk)
    result = cli("report", "--input", str(tmp_path / "runs"), "--output", str(tmp_path / "report"), "--format", "csv")
    assert result.exit_code == 0, result.output
    assert "journal.jsonl: line 5 skipped" in result.output and "Traceback" not in result.output


def test_resume_refuses_then_repair_moves_the_line_aside(tmp_path):
    run_dir = scenario_a(tmp_path / "runs")
    metadata = json.loads((run_dir / "run.json").read_text())
    before = scan_journal(run_dir / "journal.jsonl").events
    _corrupt(run_dir, 7, b"\x00")
    store = RunStore(run_dir)
    with pytest.raises(Exception) as refused:
        store.open(metadata)
    assert type(refused.value).__name__ == "UserError"
    assert "line 7" in str(refused.value) and "--repair-journal" in str(refused.value)
    replay = store.open(metadata, repair=True)
    store.close()
    side = [json.loads(line) for line in (run_dir / BAD_LINES_FILE).read_text().splitlines()]
    assert [entry["line"] for entry in side] == [7] and "\x00" in side[0]["raw"]
    after = scan_journal(run_dir / "journal.jsonl")
    assert not after.bad and after.events == before[:6] + before[7:]
    assert replay.starts == 1


def test_run_help_names_the_repair_option(cli):
    result = cli("run", "--help")
    assert "--repair-journal" in result.output and "--retry-llm-errors" in result.output
