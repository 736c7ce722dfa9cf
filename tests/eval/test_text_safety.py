"""Text a candidate wrote reaches terminals, reports and prompts only as visible characters: no terminal
control sequence, no bidi mark, no rich markup read from it. Checked on the result record (every way
one is made or read) and on ``pikeh eval``'s output for a real hostile candidate, one file and a folder."""

from __future__ import annotations

import json

from pike_harness.worker import text_safety
from pike_harness.worker.records import EvalResult

NO_POOL = ("--prestart", "0")
ESC, BEL, RLO = "\x1b", "\x07", "\u202e"
# A clipboard write (OSC 52), a screen clear, a right-to-left override, and markup that does not close
HOSTILE = f"[/x] {ESC}]52;c;SGVsbG8={BEL} [bold]{ESC}[2J{RLO}lave\r\n[Errno 2]\x9b31m"
CANDIDATE = f'''
import sys
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *inputs):
        print({HOSTILE!r}, file=sys.stderr, flush=True)
        raise RuntimeError({HOSTILE!r})
'''


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 or c == RLO})


def test_printable_shows_controls_and_bidi_marks_and_keeps_lines_and_tabs():
    shown = text_safety.printable(HOSTILE + "\ttab\rbar\n")
    assert _raw_controls(shown) == []
    assert "\\x1b]52;c;SGVsbG8=\\x07" in shown and "\\x1b[2J\\u202elave" in shown and "\\x9b31m" in shown
    assert shown.endswith("\ttab\nbar\n") and "[/x]" in shown  # markup is the printer's business, not this
    plain = "an ordinary message: 1.5 ms, naïve café, 数字, [Errno 2]\n\tindented"
    assert text_safety.printable(plain) == plain


def test_a_result_is_cleaned_however_it_was_made_or_read():
    """Made by a supervisor, or read from JSON a remote worker (or a candidate, where it can reach the
    queue's files) wrote: every string of it, nested ones included."""
    record = {"request_id": "r", "task": f"smoke/1{ESC}[8m", "category": "runtime_error", "check": f"exc{BEL}",
              "reason": HOSTILE, "stdout_tail": HOSTILE, "stderr_tail": HOSTILE, "flags": [HOSTILE],
              "environment": {HOSTILE: [HOSTILE, {"k": HOSTILE}]}, "profile": {"kernels": [{"name": HOSTILE}]},
              "outputs": [{"input_set": 0, "index": 0, "ok": False, "dtype": HOSTILE, "problem": HOSTILE}],
              "noise": {"flagged": HOSTILE},
              "paired": {"speedup": 1.0, "ci_low": 0.9, "ci_high": 1.1, "flagged": HOSTILE, "noise": {"flagged": HOSTILE}}}
    read = EvalResult.from_json(json.dumps(record))
    made = EvalResult(request_id="r", task="smoke/1", category="runtime_error", reason=HOSTILE, stderr_tail=HOSTILE)
    for result in (read, made):
        assert _raw_controls(json.dumps(result.to_dict(), ensure_ascii=False)) == []
        assert "\\x1b]52" in (result.reason or "") and "\\x1b]52" in result.stderr_tail
    assert read.task == "smoke/1\\x1b[8m" and read.check == "exc\\x07"
    assert read.paired is not None and read.paired.noise is not None and "\\u202e" in read.paired.noise.flagged


def test_pikeh_eval_prints_a_hostile_candidates_text_as_text(cli, tmp_path):
    candidate = tmp_path / "hostile.py"
    candidate.write_text(CANDIDATE, encoding="utf-8")
    result = cli("eval", str(candidate), "--task", "smoke/1", "--device", "cpu", "--protocol", "quick", *NO_POOL)
    assert result.exit_code == 0, result.output
    assert result.exception is None  # the candidate's own traceback is in its stderr, shown; ours is not
    assert "runtime_error" in result.output
    assert _raw_controls(result.output) == [], repr(result.output[-1500:])
    assert "[/x] \\x1b]52;c;SGVsbG8=\\x07 [bold]\\x1b[2J\\u202elave" in result.output  # the reason and stderr


def test_a_folder_with_a_hostile_candidate_gives_its_table(cli, tmp_path):
    folder = tmp_path / "solutions"
    folder.mkdir()
    (folder / "task_1.py").write_text(CANDIDATE, encoding="utf-8")
    result = cli("eval", str(folder), "--suite", "smoke", "--device", "cpu", "--protocol", "quick", *NO_POOL)
    assert result.exit_code == 0, result.output
    assert result.exception is None and _raw_controls(result.output) == []
    assert "task_1.py (smoke/1): " in result.output and "[/x] \\x1b]52" in result.output
    assert "1 of 1 candidates evaluated" in result.output
