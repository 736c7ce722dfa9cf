"""Replaying a journal: what counts as an interrupted evaluation, and a torn last line."""

from __future__ import annotations

import json

from pike_harness.host.store import Replay, read_journal


def _start(key):
    return {"type": "eval_start", "task": "smoke/1", "key": key}


def test_only_harness_deaths_count_as_interrupted_starts():
    abort = {"type": "eval_abort", "task": "smoke/1", "key": "a", "why": "EvaluatorError"}
    # Two cluster outages (each journaled as an abort), then a crash: one bare start.
    replay = Replay.from_events([_start("a"), abort, _start("a"), abort, _start("a")])
    assert replay.eval_starts[("smoke/1", "a")] == 1
    # Two crashes in a row (no abort written): the candidate is not tried a third time.
    replay = Replay.from_events([_start("b"), _start("b")])
    assert replay.eval_starts[("smoke/1", "b")] == 2


def test_a_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps(_start("a")) + "\n" + '{"type": "eval", "task": "smo')
    assert read_journal(path) == [_start("a")]
