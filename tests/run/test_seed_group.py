"""``pikeh run --seeds``: one resumable run directory per seed in a seed group folder.

Fast: offline:mutate writes the programs and the fake evaluator (pike_harness.testing) judges them.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from pathlib import Path

import pytest

from pike_harness.cli import App
from pike_harness.errors import UserError
from pike_harness.host.journal_reading import read_journal
from pike_harness.host.plugins import PluginHost
from pike_harness.host.seed_group import GROUP_FILE, chosen_seeds, launch_seeds, parse_seeds
from pike_harness.host.store import find_runs
from pike_harness.testing import default_verdict, fake_evaluator_plugin, invoke

RUN = ["run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "offline:mutate",
       "--query-budget", "2", "--parallel", "2", "--max-fix-attempts", "0", "--evaluator", "fake"]


def _events(run_dir: Path) -> list[dict]:
    return read_journal(run_dir / "journal.jsonl")


def test_seed_lists():
    assert parse_seeds("0,1,2") == [0, 1, 2]
    assert parse_seeds("3-5,1,4") == [3, 4, 5, 1]
    assert chosen_seeds(None, 3, 7) == [7, 8, 9]
    assert chosen_seeds(None, None, 0) is None
    for bad in ("a", "2-1", "1,,2"):
        with pytest.raises(UserError):
            parse_seeds(bad)
    with pytest.raises(UserError, match="not both"):
        chosen_seeds("0,1", 2, 0)


def test_seeds_are_separate_runs_in_one_group(tmp_path: Path):
    result = invoke(*RUN, "--seeds", "0,1", "--output-dir", str(tmp_path), plugins={"fake": fake_evaluator_plugin()})
    assert result.exit_code == 0, result.output
    (group,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    recorded = json.loads((group / GROUP_FILE).read_text())
    assert recorded["seeds"] == [0, 1] and "seed" not in recorded["config"]
    runs = sorted(find_runs([tmp_path]))  # reports find the seeds' runs through the group folder
    assert [p.name for p in runs] == [f"{group.name}_s0", f"{group.name}_s1"]
    metas = [json.loads((p / "run.json").read_text()) for p in runs]
    assert [m["config"]["seed"] for m in metas] == [0, 1]
    assert metas[0]["config"] | {"seed": 1} == metas[1]["config"]  # one configuration, two seeds
    # The seed reaches the LLM backend's per-query seed: offline:mutate answers the same prompt differently.
    answers = [{e["key"]: e["response"]["text"] for e in _events(p) if e["type"] == "llm"} for p in runs]
    assert answers[0].keys() == answers[1].keys() and answers[0] != answers[1]
    for p in runs:
        assert _events(p)[-1] == {**_events(p)[-1], "type": "run_end", "status": "complete"}

    # Another configuration in the same group folder is refused by name.
    again = invoke(*RUN[:-4], "--evaluator", "fake", "--parallel", "1", "--max-fix-attempts", "0", "--seeds", "0",
                   "--run-name", group.name, "--output-dir", str(tmp_path), plugins={"fake": fake_evaluator_plugin()})
    assert again.exit_code == 1 and "holds another configuration" in again.output and "parallel" in again.output


def test_ctrl_c_stops_the_group_and_a_rerun_resumes_the_unfinished_seeds(tmp_path: Path):
    evaluations = itertools.count(1)  # next() is atomic: two evaluations at once (--parallel 2) get two numbers
    plugins = []

    def interrupting(request):
        # Seed 0 evaluates a baseline and two candidates; the second seed's first candidate gets a Ctrl-C.
        # (No final re-timing, which would add evaluations: tests/run/test_final_timing.py covers it.)
        if next(evaluations) == 5:
            os.kill(os.getpid(), signal.SIGINT)
            # The evaluation is still going when the run sees the Ctrl-C: it ends only once the stopping run
            # closed its evaluator (a fixed sleep let a starved main thread see the run complete first).
            (evaluator,) = [e for e in plugins[-1].built if any(r is request for r in e.requests)]
            deadline = time.monotonic() + 60
            while not evaluator.closed and time.monotonic() < deadline:
                time.sleep(0.01)
        return default_verdict(request)

    def run_group(verdict) -> str:
        plugins.append(fake_evaluator_plugin(verdict))
        App._host = PluginHost(extra=[("fake", plugins[-1], False)])
        try:
            core = {"strategy": "best-of-n", "suite": "smoke", "tasks": "1", "llm": "offline:mutate",
                    "query_budget": 2, "llm_concurrency": 2, "seed": 0, "output_dir": tmp_path,
                    "run_name": "study", "final_retime": False}
            return launch_seeds(App(), core, {"parallel": 2, "max_fix_attempts": 0},
                                {"evaluator": "fake", "device": "cpu", "protocol": "quick"}, [0, 1, 2], live=False)
        finally:
            App.reset()

    assert run_group(interrupting) == "interrupted"
    group = tmp_path / "study"
    assert not (group / "study_s2").exists()  # the seeds after the stopped one were not started
    first = _events(group / "study_s1")
    assert first[-1]["type"] == "run_end" and first[-1]["status"] == "interrupted"
    done_before = _events(group / "study_s0")

    assert run_group(default_verdict) == "complete"
    # The finished seed is only looked at (no query asked again); the stopped one resumes; the last one runs.
    after = _events(group / "study_s0")
    assert [e["type"] for e in after[len(done_before):]] == ["run_start", "run_end"]
    resumed = _events(group / "study_s1")
    assert sum(e["type"] == "run_start" for e in resumed) == 2 and resumed[-1]["status"] == "complete"
    asked = [e["key"] for e in resumed if e["type"] == "llm"]
    assert len(asked) == len(set(asked))  # answers journaled before the Ctrl-C were replayed, not asked again
    assert _events(group / "study_s2")[-1]["status"] == "complete"


def test_a_stop_reaches_the_group_around_a_run():
    from pike_harness.host.run_signals import StopSignals

    # what was there before (Python's default, or "ignored" when pytest was started as a background job
    # of a script, which inherits SIGINT ignored) is what must be back afterwards
    before = signal.getsignal(signal.SIGINT)
    with StopSignals() as group:
        os.kill(os.getpid(), signal.SIGINT)  # between two seeds' runs
        time.sleep(0.05)
        with StopSignals() as run:
            assert run.requested  # the next run starts already stopping, so it stops at once
            os.kill(os.getpid(), signal.SIGTERM)  # during a run: the run's handler forwards it
            time.sleep(0.05)
        assert (group.count, group.last) == (2, "SIGTERM") and run.abandon
    assert signal.getsignal(signal.SIGINT) is before
