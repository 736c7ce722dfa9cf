"""Off a terminal, tables are drawn at the width their content needs: nothing is cut or wrapped.

rich alone falls back to 80 columns in a pipe or a file, which turned milliseconds into ``0`` and
wrapped run names over several lines (``pikeh run ... > results.txt``, ``pikeh tasks audit | cat``).
"""

from __future__ import annotations

import io
import subprocess
import sys

from rich.table import Table

from pike_harness.host import terminal


def test_a_wide_table_written_to_a_file_keeps_every_value():
    out = io.StringIO()
    table = Table("run", "eager ms", "best ms", "legend")
    name = "pike-b_level3-pike_google-gemini-2.5-pro_fix-google-gemini-2.5-flash_seed0"
    legend = "confirmed by ten re-timings side by side, 95% interval from a Student t over the repeats " * 2
    table.add_row(name, "0.02234", "0.01871", legend.strip())
    terminal.console(file=out).print(table)
    lines = out.getvalue().splitlines()
    row = next(line for line in lines if name in line)
    assert "0.02234" in row and "0.01871" in row and legend.strip() in row
    assert len(lines) == 5 and "\x1b[" not in out.getvalue()  # frame, header, rule, one row, frame
    assert max(len(line) for line in lines) < 300  # drawn at its content's width, not stretched


def test_a_piped_command_prints_full_rows():
    """A real pipe: `pikeh tasks list --suite smoke | cat` keeps each task on one line."""
    proc = subprocess.run([sys.executable, "-m", "pike_harness", "tasks", "list", "--suite", "smoke"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    title = next(line for line in proc.stdout.splitlines() if line.strip().startswith("smoke:"))
    assert title.strip() == "smoke: six small tasks for demos and CPU tests"  # the suite's name once
    rows = [line for line in proc.stdout.splitlines() if "│" in line and "smoke/" in line]
    assert rows and all(line.count("│") == rows[0].count("│") for line in rows)
