"""A run's record survives bad input and a bad host: values that are not finite are refused (they used to
switch a budget off and strand the run), a journal without its run.json is not adopted under other
options, a full disk stops the run with one line and a journal that ends on a complete event, and
answers abandoned at a stop are journaled as ``llm_abandoned`` (a real Runner and RunStore; the LLM and
the evaluator are small stand-ins, so the test controls when answers come, and nothing waits on a clock)."""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from when_ready import when

from pike_harness.cli import App
from pike_harness.contracts.evaluation import Evaluator
from pike_harness.contracts.journal import LLMAnswer, RunEnd
from pike_harness.contracts.llm import LLMError, LLMRequest, LLMResponse, Usage
from pike_harness.contracts.model import EvalResult
from pike_harness.contracts.strategy import Strategy
from pike_harness.errors import UserError
from pike_harness.host import store as store_module
from pike_harness.host.journal_reading import Replay, read_journal, scan_journal
from pike_harness.host.run import Runner
from pike_harness.host.run_config import RunConfig
from pike_harness.host.store import RunStore, config_differences


# -- stand-ins ----------------------------------------------------------------------------------------
class InstantEvaluator(Evaluator):
    """Every evaluation is correct at once: the reference at 10 ms, a candidate at 5 ms."""

    def submit(self, request: Any) -> Future:
        future: Future = Future()
        reference = request.baseline_mode is not None or request.candidate_source == request.reference_source
        future.set_result(EvalResult(request_id=request.request_id, task=request.task, category="correct",
                                     runtime_ms=10.0 if reference else 5.0))
        return future

    def close(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"name": "instant"}


class StubLLM:
    """Answers each query (at once, or when ``release`` is set once ``hold``); ``error`` fails them."""

    def __init__(self, *, hold: bool = False, error: LLMError | None = None):
        self.hold = hold
        self.error = error
        self.release = threading.Event()
        self.asked = 0
        self._lock = threading.Lock()

    def request_hash(self, request: LLMRequest) -> str:
        return f"sha-{request.key}"

    def complete(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            self.asked += 1
        if self.error is not None:
            raise self.error
        if self.hold:
            self.release.wait(timeout=120)
        return LLMResponse(text="```python\nclass ModelNew: pass\n```\n", usage=Usage(prompt_tokens=100, output_tokens=10),
                           latency_s=0.1, provider="stub", model="stub", cost_usd=0.5)


class TwoQueries(Strategy):
    """Two attempts side by side, then done."""

    name = "two-queries"

    def run_task(self, ctx: Any) -> None:
        prompt = [{"role": "user", "content": "x" * 400}]
        futures = [ctx.submit_attempt("optimize", prompt, key=f"q{i}") for i in range(2)]
        for future in futures:
            future.result()


def _runner(tmp_path: Path, llm: Any, *, grace_s: float = 0.0) -> Runner:
    App.reset()
    tasks = [App().catalog.resolve("smoke/1")]
    config = RunConfig(strategy="two-queries", suite="smoke", llm="stub:stub", device="cpu", final_retime=False)
    runner = Runner(config, store=RunStore(tmp_path / "r"), tasks=tasks, strategy=TwoQueries(), llm=llm,
                    evaluator_factory=InstantEvaluator, grace_s=grace_s)
    runner.min_free_bytes = 0  # the test's disk may be fuller than a run's threshold allows
    return runner



# -- H2: nan and inf ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["--money-budget", "nan"], ["--money-budget", "inf"], ["--temperature", "nan"],
                                  ["--retime-share", "nan"], ["--timeout", "inf"]])
def test_a_value_that_is_not_finite_is_refused_on_the_command_line(tmp_path, cli, args):
    result = cli("run", "--strategy", "best-of-n", "--suite", "smoke", "--llm", "offline:mutate",
                 "--output-dir", str(tmp_path / "runs"), *args)
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output and args[0] in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("toml", ["money_budget = nan", "money_budget = inf", "temperature = -inf",
                                  "timeout = inf", "retime_max_seconds = nan"])
def test_a_value_that_is_not_finite_is_refused_in_a_config_file(tmp_path, cli, toml):
    (tmp_path / "run.toml").write_text(f'strategy = "best-of-n"\nsuite = "smoke"\nllm = "offline:mutate"\n{toml}\n')
    result = cli("run", "--config", str(tmp_path / "run.toml"), "--output-dir", str(tmp_path / "runs"))
    assert result.exit_code == 1, result.output
    name = toml.split(" =")[0]
    assert f"{name}: " in result.output and "is not a finite number" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_a_plugin_float_option_refuses_nan_too():
    import dataclasses

    import click

    from pike_harness.cli.config_options import dataclass_options

    @dataclasses.dataclass
    class Config:
        ratio: float = dataclasses.field(default=0.5, metadata={"help": "a ratio"})
        bounded: float = dataclasses.field(default=0.5, metadata={"min": 0.0, "max": 1.0})

    for option in dataclass_options(Config, tag="test"):
        with pytest.raises(click.BadParameter, match="not a finite number"):
            option.type.convert("nan", option, None)
        assert option.type.convert("0.25", option, None) == 0.25


def test_run_config_refuses_nan_from_a_library_caller():
    config = RunConfig(strategy="best-of-n", suite="smoke", llm="offline:mutate", money_budget=float("nan"))
    with pytest.raises(UserError, match="money_budget: nan is not a finite number"):
        config.check_finite()
    config = RunConfig(strategy="best-of-n", suite="smoke", llm="offline:mutate",
                       strategy_options={"ratio": float("inf")})
    with pytest.raises(UserError, match=r"strategy_options.ratio: inf"):
        config.check_finite()


def test_a_run_json_holding_nan_resumes_as_the_run_without_a_budget_it_was(tmp_path):
    """Older versions wrote ``"money_budget": NaN`` (no budget in force); its resume was refused forever
    ("was nan, now nan"). It resumes without --money-budget now, and a real budget is still a difference."""
    config = {"strategy": "best-of-n", "query_budget": 4, "money_budget": None}
    store = RunStore(tmp_path / "r")
    store.open({"config": {**config, "money_budget": float("nan")}})
    store.close()
    assert '"money_budget": NaN' in (tmp_path / "r" / "run.json").read_text()
    store.open({"config": config})
    store.close()
    with pytest.raises(UserError, match="money_budget: was None, now 5.0"):
        store.open({"config": {**config, "money_budget": 5.0}})
    assert config_differences({"x": math.nan}, {"x": math.nan}) == []
    assert config_differences({"x": math.nan}, {"x": 1.0}) == ["x: was nan, now 1.0"]


# -- M2: a journal without its run.json -----------------------------------------------------------------
def test_a_journal_without_run_json_is_refused_not_adopted(tmp_path):
    store = RunStore(tmp_path / "r")
    store.open({"config": {"query_budget": 4}})
    store.append(LLMAnswer(task="smoke/1", key="q0", role="optimize", index=1, counted=True, request_sha256=None,
                           response={}))
    store.close(final=RunEnd(status="interrupted"))
    (tmp_path / "r" / "run.json").unlink()
    with pytest.raises(UserError, match="has a journal but no run.json") as raised:
        RunStore(tmp_path / "r").open({"config": {"query_budget": 6}})
    assert "restore run.json" in raised.value.message
    assert not (tmp_path / "r" / "run.json").exists(), "the refusal must not write today's options"
    # An empty journal (a run that never got past its start) is no record: it is simply begun.
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "journal.jsonl").write_text("")
    RunStore(tmp_path / "s").open({"config": {"query_budget": 6}})


# -- M1: a full disk ------------------------------------------------------------------------------------
def _full_disk_after(monkeypatch: pytest.MonkeyPatch, path: Path, good_writes: int, *, partial: bool = True) -> None:
    """``os.write`` to ``path`` succeeds ``good_writes`` times, then writes part of the line (a torn
    line, as a real full disk leaves) and fails with ENOSPC, as a full file system does from then on."""
    real_write = os.write
    left = {"n": good_writes}

    def write(fd: int, data: Any) -> int:
        try:
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            target = None
        if target != path:
            return real_write(fd, data)
        if left["n"] > 0:
            left["n"] -= 1
            return real_write(fd, data)
        if partial and len(data) > 8:
            left["n"] = -1
            partial_bytes = bytes(data)[: len(data) // 2]
            real_write(fd, partial_bytes)
            return len(partial_bytes)  # a short write: the writer must try the rest, which fails
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module.os, "write", write)


def test_a_failed_journal_write_is_one_error_and_leaves_no_torn_line(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "r")
    store.open({"config": {}})
    journal = tmp_path / "r" / "journal.jsonl"
    _full_disk_after(monkeypatch, journal.resolve(), 1)
    store.append(RunEnd(status="kept"))
    with pytest.raises(UserError) as raised:
        store.append(RunEnd(status="lost"))
    message = raised.value.message
    assert str(journal) in message and "[Errno 28] ENOSPC" in message and "rerun the same command" in message
    with pytest.raises(UserError):  # nothing is written after a failed write
        store.append(RunEnd(status="also lost"))
    store.close(final=RunEnd(status="failed"))  # the close does not raise a second error over the first
    scan = scan_journal(journal)
    assert not scan.torn_tail and not scan.bad
    assert [e["status"] for e in scan.events] == ["kept"]


def test_a_full_disk_stops_the_run_with_one_line_and_keeps_the_journal_exact(tmp_path, monkeypatch):
    """The first answer's write fails: the run ends with that error (not a traceback from its shutdown,
    which used to write again and fail again), and the journal ends on its last complete event."""
    runner = _runner(tmp_path, StubLLM())
    journal = (tmp_path / "r" / "journal.jsonl")
    real_append = RunStore.append

    def append(self: RunStore, event: Any) -> None:
        if getattr(event, "type", None) == "llm":  # the disk fills as the first answer arrives
            _full_disk_after(monkeypatch, self.journal_path.resolve(), 0)
        real_append(self, event)

    monkeypatch.setattr(RunStore, "append", append)
    with pytest.raises(UserError) as raised:
        runner.run()
    message = raised.value.message
    assert "cannot write" in message and "journal.jsonl" in message and "ENOSPC" in message
    assert "\n" not in message
    scan = scan_journal(journal)
    assert not scan.torn_tail and not scan.bad
    assert scan.events[-1]["type"] in ("eval", "baseline")  # no run_end: the disk had no room for one
    assert not (tmp_path / "r" / "run.duckdb").exists()


def test_a_file_of_the_run_folder_that_cannot_be_written_stops_the_run(tmp_path, monkeypatch):
    """A prompt.md that cannot be written (a full disk) stops the run before its query is sent."""
    llm = StubLLM()
    runner = _runner(tmp_path, llm)
    real = store_module._atomic_write

    def atomic_write(path: Path, text: str) -> None:
        if path.name == "prompt.md":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, text)

    monkeypatch.setattr(store_module, "_atomic_write", atomic_write)
    with pytest.raises(UserError, match=r"cannot write .*prompt\.md: \[Errno 28\] ENOSPC"):
        runner.run()
    assert llm.asked == 0
    events = read_journal(tmp_path / "r" / "journal.jsonl")
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "failed"


def test_a_nearly_full_disk_stops_the_run_before_any_query(tmp_path):
    llm = StubLLM()
    runner = _runner(tmp_path, llm)
    runner.min_free_bytes = 2**62  # more than any disk has free
    with pytest.raises(UserError, match="free for .*too little to record the answers"):
        runner.run()
    assert llm.asked == 0
    assert read_journal(tmp_path / "r" / "journal.jsonl")[-1]["status"] == "failed"


# -- L2: abandoned answers ------------------------------------------------------------------------------
def test_answers_abandoned_at_a_stop_are_journaled_and_the_resume_ignores_them(tmp_path):
    llm = StubLLM(hold=True)
    runner = _runner(tmp_path, llm, grace_s=0.0)  # no wait for answers: both are abandoned
    try:
        when(lambda: llm.asked >= 2, lambda: os.kill(os.getpid(), signal.SIGTERM))
        assert runner.run() == "interrupted"
    finally:
        llm.release.set()  # the held answers go to a run that has closed its journal
    events = read_journal(tmp_path / "r" / "journal.jsonl")
    abandoned = [e for e in events if e["type"] == "llm_abandoned"]
    assert sorted(e["key"] for e in abandoned) == ["q0", "q1"]
    for event in abandoned:
        assert event["task"] == "smoke/1" and event["role"] == "optimize"
        assert event["request_sha256"] == f"sha-smoke/1#{event['key']}"
        assert event["estimated_prompt_tokens"] == 100  # 400 characters / 4
        assert event["estimated_cost_usd"] is None  # the stand-in has no prices: unknown, not zero
        assert "answer had not come" in event["why"]
    assert events[-1]["type"] == "run_end" and not [e for e in events if e["type"] == "llm"]
    replay = Replay.from_events(events)
    assert not replay.llm and not replay.llm_errors  # the resume asks them again


def test_a_query_whose_setup_was_refused_is_not_abandoned(tmp_path):
    """A 401 is not billed and not journaled (the run stops); it is no abandoned answer either."""
    runner = _runner(tmp_path, StubLLM(error=LLMError("HTTP 401: bad key", status=401)))
    with pytest.raises(UserError, match="refused the run's requests"):
        runner.run()
    events = read_journal(tmp_path / "r" / "journal.jsonl")
    assert not [e for e in events if e["type"] in ("llm_abandoned", "llm", "llm_error")]
    assert events[-1]["type"] == "run_end"


def test_an_answered_run_journals_nothing_abandoned(tmp_path):
    runner = _runner(tmp_path, StubLLM())
    assert runner.run() == "complete"
    events = read_journal(tmp_path / "r" / "journal.jsonl")
    assert sum(e["type"] == "llm" for e in events) == 2
    assert not [e for e in events if e["type"] == "llm_abandoned"]
    assert json.loads((tmp_path / "r" / "run.json").read_text())["config"]["money_budget"] is None
