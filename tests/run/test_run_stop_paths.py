"""Every stop closes every started evaluation: SIGTERM, and a fatal error in another task, with an
evaluator whose evaluations hang until it is closed (a real Runner and a real RunStore; the evaluator
is a small stand-in so the test controls exactly when evaluations end)."""

from __future__ import annotations

import os
import signal
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from when_ready import when

from pike_harness.cli import App
from pike_harness.contracts.evaluation import Evaluator, EvaluatorError
from pike_harness.contracts.strategy import Strategy
from pike_harness.errors import UserError
from pike_harness.host.journal_reading import read_journal
from pike_harness.host.run import Runner
from pike_harness.host.run_config import RunConfig
from pike_harness.host.store import RunStore


class HangingEvaluator(Evaluator):
    """Evaluations never finish on their own; closing fails them, as a real evaluator's close does.
    With ``fail_task``, that task's evaluations fail at once (an evaluator error: fatal to the run)."""

    def __init__(self, fail_task: str | None = None):
        self.fail_task = fail_task
        self.pending: list[Future] = []

    def submit(self, request: Any) -> Future:
        future: Future = Future()
        if request.task == self.fail_task:
            future.set_exception(EvaluatorError("the worker vanished"))
        else:
            self.pending.append(future)
        return future

    def close(self) -> None:
        for future in self.pending:
            if not future.done():
                future.set_exception(EvaluatorError("the evaluation was aborted: the evaluator is closing"))

    def describe(self) -> dict[str, Any]:
        return {"name": "hanging"}


class NothingMore(Strategy):
    name = "nothing-more"

    def run_task(self, ctx: Any) -> None:
        return None


def _runner(tmp_path: Path, evaluator: HangingEvaluator, refs: list[str]) -> Runner:
    App.reset()
    tasks = [App().catalog.resolve(ref) for ref in refs]
    config = RunConfig(strategy="nothing-more", suite="smoke", llm="offline:mutate", device="cpu")
    return Runner(config, store=RunStore(tmp_path / "r"), tasks=tasks, strategy=NothingMore(), llm=None,
                  evaluator_factory=lambda: evaluator, grace_s=1.0)



def _started(path: Path, count: int) -> bool:
    return sum(e["type"] == "eval_start" for e in read_journal(path)) >= count


def _assert_every_start_closed(events: list[dict]) -> None:
    starts = [(e["task"], e["key"]) for e in events if e["type"] == "eval_start"]
    ends = [(e["task"], e["key"]) for e in events if e["type"] in ("eval", "eval_abort")]
    assert sorted(starts) == sorted(ends)
    last_abort = max(i for i, e in enumerate(events) if e["type"] == "eval_abort")
    assert events[-1]["type"] == "run_end" and last_abort < len(events) - 1


def test_sigterm_aborts_every_running_evaluation_before_run_end(tmp_path):
    runner = _runner(tmp_path, HangingEvaluator(), ["smoke/1", "smoke/2"])
    journal = tmp_path / "r" / "journal.jsonl"
    when(lambda: _started(journal, 2), lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert runner.run() == "interrupted"
    events = read_journal(journal)
    _assert_every_start_closed(events)
    assert sum(e["type"] == "eval_abort" for e in events) == 2
    assert events[-1]["status"] == "interrupted" and events[-1]["why"] == "SIGTERM"
    assert not [e for e in events if e["type"] == "eval"], "no verdict was invented for an aborted evaluation"


def test_a_fatal_error_in_one_task_aborts_the_others_evaluations(tmp_path):
    runner = _runner(tmp_path, HangingEvaluator(fail_task="smoke/2"), ["smoke/1", "smoke/2"])
    with pytest.raises(UserError, match="the evaluator failed: the worker vanished"):
        runner.run()
    events = read_journal(tmp_path / "r" / "journal.jsonl")
    _assert_every_start_closed(events)
    assert events[-1]["status"] == "failed" and "the worker vanished" in events[-1]["why"]


# A run that stops on an error while its own queries still wait leaves at once (``os._exit``); a thread of
# an earlier run in the same process (a test's, a notebook's) still ending is not this run's, and must not
# make an ordinary error end the whole process. In a fresh process: without the rule, it ends this one.
LEFTOVER = r'''
import sys
import threading

threading.Thread(target=threading.Event().wait, name="pikeh-attempt-leftover", daemon=True).start()
from pike_harness.cli import cli

try:
    cli.main(["run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "99", "--llm", "offline:mutate",
              "--query-budget", "1", "--output-dir", sys.argv[1]])
except SystemExit as exc:
    print("returned", exc.code, flush=True)
'''


def test_an_earlier_runs_thread_does_not_end_the_process_on_a_user_error(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LEFTOVER, str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert "has no task 99" in done.stderr, done.stderr[-2000:]
    assert done.stdout.strip() == "returned 1", (done.returncode, done.stdout, done.stderr[-2000:])
