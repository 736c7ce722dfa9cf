"""Whole runs on the offline backends: offline:mutate drives PIKE-B, and offline:replay replays it.
The fake evaluator judges (what is tested is the backends and the run loop, not evaluation)."""

from __future__ import annotations

from pathlib import Path

from pike_harness.host.store import read_journal
from pike_harness.testing import fake_evaluator_plugin, invoke

# Phase 0 and its fix rounds only: prompts do not depend on timings, so a replay asks the same questions.
COMMON = ["--strategy", "pike-b", "--suite", "smoke", "--tasks", "4", "--query-budget", "10", "--num-branches", "3",
          "--max-ideas", "3", "--max-fix-attempts", "2", "--max-phases", "1", "--evaluator", "fake"]


def _run(out: Path, name: str, *extra: str):
    return invoke("run", *COMMON, "--output-dir", str(out), "--run-name", name, *extra,
                  plugins={"fake": fake_evaluator_plugin()})


def _answers(run_dir: Path) -> dict[str, str]:
    return {e["key"]: e["response"]["text"] for e in read_journal(run_dir / "journal.jsonl") if e["type"] == "llm"}


def test_mutate_drives_pike_b_and_replay_reproduces_it(tmp_path):
    # A money budget is accepted without prices: offline:mutate declares its calls free.
    first = _run(tmp_path, "mutate", "--llm", "offline:mutate", "--money-budget", "5")
    assert first.exit_code == 0, first.output[-3000:]
    assert "offline:mutate (not an LLM)" in first.stderr  # never passed off as a model
    assert "smoke/4 phase 0: " in (tmp_path / "mutate" / "log.txt").read_text()  # a strategy's line names its task
    recorded = _answers(tmp_path / "mutate")
    assert "brainstorm" in recorded and {"p000/s00", "p000/s01", "p000/s02"} <= set(recorded)
    attempts = [e for e in read_journal(tmp_path / "mutate" / "journal.jsonl") if e["type"] == "attempt"]
    assert any(e["category"] == "correct" for e in attempts)

    replay = _run(tmp_path, "replayed", "--llm", "offline:replay", "--replay-dir", str(tmp_path / "mutate"))
    assert replay.exit_code == 0, replay.output[-3000:]
    assert _answers(tmp_path / "replayed") == recorded  # the same queries got the same answers
    replayed = [e for e in read_journal(tmp_path / "replayed" / "journal.jsonl") if e["type"] == "attempt"]
    assert sorted((e["key"], e["category"]) for e in replayed) == sorted((e["key"], e["category"]) for e in attempts)
