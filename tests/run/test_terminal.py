"""The terminal: the live table fits 80 columns, and `pikeh eval` shows a spinner with its stage on a
terminal (a real pseudo-terminal, a real evaluation on the CPU)."""

from __future__ import annotations

import io
import os
import pty
import select
import sys
from pathlib import Path

from rich.console import Console

from pike_harness.host.progress import RunProgress, queries_text

CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
'''


def test_the_live_table_fits_80_columns_without_cutting_anything():
    out = io.StringIO()
    console = Console(file=out, width=80)
    progress = RunProgress("demo: pike-b on smoke with offline:mutate (not an LLM)",
                           [f"level3-pike/{i}" for i in (1, 12, 30)], 300, live=False, console=console)
    progress.update("level3-pike/12", phase="phase 3", queries_used=309, spend_usd=12.5, best_speedup=12.34)
    progress.tasks["level3-pike/12"].counts.update(correct=120, incorrect=80, runtime_error=90, compile_error=10,
                                                    timeout=5, rejected=3, llm_error=1)
    console.print(progress._table())
    lines = out.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "…" not in out.getvalue(), out.getvalue()
    assert "300/300+9" in out.getvalue() and "12.34x" in out.getvalue()
    assert queries_text(309, 300) == "300/300 +9 past the budget" and queries_text(12, 300) == "12/300"
    assert queries_text(309, 300, short=True) == "300/300 +9"


def test_the_live_tables_phase_is_text_whatever_a_strategy_notes():
    """A strategy's status note may quote an answer or a candidate: shown in the live table, never read
    as markup (an unmatched ``[/x]`` would end the refresh with a MarkupError) nor obeyed."""
    out = io.StringIO()
    console = Console(file=out, width=200)
    progress = RunProgress("r", ["smoke/1"], 10, live=False, console=console)
    progress.update("smoke/1", phase="", note="[/x]\x1b[2J")  # the phase column is 12 wide
    console.print(progress._table())
    assert " [/x]\\x1b[2J " in out.getvalue() and "\x1b" not in out.getvalue()


def test_eval_shows_its_stage_on_a_terminal(tmp_path):
    candidate = tmp_path / "candidate.py"
    candidate.write_text(CANDIDATE)
    pid, fd = pty.fork()
    if pid == 0:  # the child: pikeh eval on a pseudo-terminal
        # --prestart 0: the one candidate's sandbox starts when it is needed; no idle pool is started beside it
        os.execvp(sys.executable, [sys.executable, "-m", "pike_harness", "eval", str(candidate), "--task", "smoke/1",
                                   "--device", "cpu", "--protocol", "quick", "--prestart", "0",
                                   "--workdir", str(tmp_path / "w")])
    output = b""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 300)
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert os.WEXITSTATUS(status) == 0, text[-2000:]
    assert "starting the local evaluator" in text and "evaluating candidate.py on smoke/1" in text
    assert "correct" in text
    assert Path(tmp_path / "w").is_dir()
