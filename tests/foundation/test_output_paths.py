"""Every output path is checked before work starts: one line naming the path and the problem, exit 2.

The commands run for real: the assertions check that nothing was created (no run started) besides the
one-line message, and that the file the path runs into is untouched.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

COMMANDS = {
    "run": ("run", "--strategy", "pike-b", "--suite", "smoke", "--llm", "offline:mutate", "--output-dir", "{bad}"),
    "run --llm-cache": ("run", "--strategy", "pike-b", "--suite", "smoke", "--llm", "offline:mutate",
                        "--output-dir", "{good}", "--llm-cache", "{bad}"),
    "demo": ("demo", "--output-dir", "{bad}"),
    "report": ("report", "--input", "{good}", "--output", "{bad}"),
    "baselines": ("baselines", "--suite", "smoke", "--output-dir", "{bad}"),
    "import pike": ("import", "pike", "{good}", "--output-dir", "{bad}"),
}


@pytest.mark.parametrize("inside", [False, True], ids=["the file itself", "a folder inside a file"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_path_on_a_file_is_one_line_and_exit_2(cli, tmp_path, command, inside):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    bad = afile / "sub" if inside else afile
    good = tmp_path / "good"
    good.mkdir()
    args = [a.format(bad=bad, good=good) for a in COMMANDS[command]]
    result = cli(*args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    option = args[-2]
    problem = f"{afile} is a file, so no folder can be made inside it" if inside else "is a file, not a folder"
    assert lines == [f"Error: {option} {bad}: {problem}"]
    assert afile.read_text() == "mine\n" and sorted(p.name for p in good.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_output_path_in_a_read_only_folder_is_named(cli, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = cli("report", "--input", str(tmp_path), "--output", str(locked / "report"))
    finally:
        locked.chmod(0o700)
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: --output {locked / 'report'}: {locked} is not writable"


def test_an_unknown_strategy_is_a_usage_error(cli, tmp_path):
    result = cli("run", "--strategy", "nope", "--suite", "smoke", "--llm", "offline:mutate",
                 "--output-dir", str(tmp_path / "runs"))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: unknown strategy 'nope' (available: "), lines
    assert not (tmp_path / "runs").exists()


def test_check_output_dir_accepts_new_and_existing_folders(tmp_path: Path):
    from pike_harness.api import check_output_dir

    check_output_dir(tmp_path, "--output")
    check_output_dir(tmp_path / "new" / "deeper", "--output")
    assert not (tmp_path / "new").exists()  # a check, not a mkdir
