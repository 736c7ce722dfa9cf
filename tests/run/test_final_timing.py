"""`pikeh run` re-times each task's final best paired against its eager reference (the real CLI, the
real openai SDK against the loopback fake model, the fake evaluator's deterministic paired timings),
and picks that best by PIKE's rule: code containing torch.jit.trace never wins unless asked."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from pike_harness.api import EvalRequest, EvalResult
from pike_harness.cli import App
from pike_harness.host.final_timing import RETIME_FLOOR_S, retime_seconds
from pike_harness.host.journal_reading import epoch_of
from pike_harness.host.launch import launch_run
from pike_harness.host.plugins import PluginHost
from pike_harness.host.store import read_journal
from pike_harness.testing import FakeReply, default_verdict, fake_evaluator_plugin, invoke
from pike_harness.testing.llm_server import FakeLLMServer

MS = re.compile(r"# ms=([0-9.]+)")


def program(ms: float, *, traced: bool = False) -> str:
    body = "torch.jit.trace(lambda t: t, (x,))(x)" if traced else "x * 1"
    return (f"import torch\nimport torch.nn as nn\n# ms={ms}\n\n\nclass ModelNew(nn.Module):\n"
            f"    def forward(self, x):\n        return {body}\n")


# Three answers: the fastest traces with torch.jit.trace, so PIKE's rule passes it over.
PROGRAMS = {"plain-slow": program(0.5), "traced-fast": program(0.25, traced=True), "plain-fast": program(0.4)}


def timed_verdict(request: EvalRequest) -> EvalResult:
    """The reference at 1 ms; a candidate at the runtime its ``# ms=`` line declares."""
    result = default_verdict(request)
    found = MS.search(request.candidate_source)
    if result.is_correct and found and request.candidate_source != request.reference_source:
        result.runtime_ms = float(found.group(1))
    return result


@pytest.fixture
def server():
    with FakeLLMServer() as fake:
        answers = iter(PROGRAMS.values())
        fake.set_reply(lambda _request: FakeReply.code(next(answers, PROGRAMS["plain-slow"])))
        yield fake


def pikeh_run(server: FakeLLMServer, out: Path, *extra: str, noisy=None, pairs: bool = True, verdict=timed_verdict):
    plugin = fake_evaluator_plugin(verdict, noisy=noisy, pairs=pairs)
    result = invoke("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "4", "--llm", "openai:fake",
                    "--llm-base-url", server.openai_base_url, "--query-budget", "3", "--parallel", "3",
                    "--evaluator", "fake", "--output-dir", str(out), "--run-name", "r", *extra,
                    plugins={"fake": plugin}, env={"OPENAI_API_KEY": "sk-test"})
    return result, plugin


def events(out: Path, kind: str) -> list[dict]:
    return [e for e in read_journal(out / "r" / "journal.jsonl") if e["type"] == kind]


def test_the_final_best_is_retimed_paired_once_and_resume_keeps_it(server, tmp_path):
    result, plugin = pikeh_run(server, tmp_path)
    assert result.exit_code == 0, result.output[-3000:]
    [timing] = events(tmp_path, "final_timing")
    best = {e["key"]: e for e in events(tmp_path, "attempt")}[timing["best_key"]]
    assert best["runtime_ms"] == 0.4, "torch.jit.trace code is not the final best by default"
    assert timing["code_sha256"] == best["code_sha256"] and timing["key"] == "final/" + timing["best_key"]
    paired = timing["result"]["paired"]
    assert paired["speedup"] == pytest.approx(1.0 / 0.4, rel=0.01) and paired["stop"] == "converged"
    assert paired["ci_low"] < paired["speedup"] < paired["ci_high"] and timing["why"] is None
    # The request asked for the run's pairing rule, and it was bracketed like any evaluation.
    [asked] = [r for r in plugin.built[0].requests if r.paired is not None]
    starts = [e for e in events(tmp_path, "eval_start") if e["key"].startswith("final/")]
    assert len(starts) == 1
    # Its blocks were capped at 10 % of the task's search (a few seconds here), never under the 5 s floor.
    # run_start precedes the task's start, so this bounds its search from above
    search_s = epoch_of(starts[0]["time"]) - epoch_of(read_journal(tmp_path / "r" / "journal.jsonl")[0]["time"])
    assert asked.paired.target_halfwidth == 0.02
    assert RETIME_FLOOR_S <= asked.paired.max_seconds <= max(RETIME_FLOOR_S, 0.1 * (search_s + 2))
    assert "final re-timing of" in (tmp_path / "r" / "log.txt").read_text()
    assert "re-timed (95% CI)" in result.output and "2.50x (2." in result.output  # the run's summary table
    # A resume of the finished run asks nothing and times nothing again.
    sent = server.count()
    again, plugin = pikeh_run(server, tmp_path)
    assert again.exit_code == 0, again.output[-3000:]
    assert server.count() == sent and len(events(tmp_path, "final_timing")) == 1
    assert not any(r.paired is not None for r in plugin.built[0].requests)
    # ...and says nothing about a re-timing it did not do; its summary table still shows the number
    assert (tmp_path / "r" / "log.txt").read_text().count("final re-timing of") == 1
    assert "final re-timing of" not in again.output and "2.50x (2." in again.output


def test_retime_seconds_are_a_share_of_the_search_within_the_floor_and_the_cap():
    assert retime_seconds(60.0, 0.1, 20.0) == RETIME_FLOOR_S  # a short search: the floor
    assert retime_seconds(60.0, 0.1, 300.0) == pytest.approx(30.0)  # 10 % of a 5-minute search
    assert retime_seconds(60.0, 0.1, 36_000.0) == 60.0  # a paper-scale search: the whole cap
    assert retime_seconds(3.0, 0.1, 20.0) == 3.0  # a cap under the floor wins
    assert retime_seconds(60.0, 0.5, -4.0) == RETIME_FLOOR_S  # a clock step back is not a negative budget
    assert epoch_of("2026-11-28T08:32:08+0000") - epoch_of("2026-11-28T08:31:58+0000") == 10.0
    assert epoch_of(None) is None and epoch_of("yesterday") is None


def test_no_final_retime_times_nothing_and_a_later_resume_catches_up(server, tmp_path):
    result, plugin = pikeh_run(server, tmp_path, "--no-final-retime")
    assert result.exit_code == 0, result.output[-3000:]
    assert events(tmp_path, "final_timing") == [] and events(tmp_path, "task_end")
    assert not any(r.paired is not None for r in plugin.built[0].requests)
    # The option is operational: the same run, resumed with it on, re-times its finished task.
    again, plugin = pikeh_run(server, tmp_path, "--retime-halfwidth", "0.05")
    assert again.exit_code == 0, again.output[-3000:]
    [timing] = events(tmp_path, "final_timing")
    assert [r.paired.target_halfwidth for r in plugin.built[0].requests if r.paired] == [0.05]
    assert timing["result"]["paired"]["speedup"] == pytest.approx(2.5, rel=0.01)


def test_include_jit_trace_lets_traced_code_win(server, tmp_path):
    result, _ = pikeh_run(server, tmp_path, "--include-jit-trace")
    assert result.exit_code == 0, result.output[-3000:]
    [timing] = events(tmp_path, "final_timing")
    assert timing["result"]["paired"]["speedup"] == pytest.approx(4.0, rel=0.01)
    [end] = events(tmp_path, "task_end")
    assert end["best_runtime_ms"] == 0.25


def test_a_noisy_timing_is_journaled_flagged(server, tmp_path):
    result, _ = pikeh_run(server, tmp_path, noisy=lambda _request: "canary 40% off its baseline")
    assert result.exit_code == 0, result.output[-3000:]
    [timing] = events(tmp_path, "final_timing")
    assert timing["result"]["paired"]["flagged"] == "canary 40% off its baseline"
    assert "flagged: canary" in (tmp_path / "r" / "log.txt").read_text()


def test_an_evaluator_that_cannot_pair_is_journaled_with_its_reason(server, tmp_path):
    result, _ = pikeh_run(server, tmp_path, pairs=False)
    assert result.exit_code == 0, result.output[-3000:]
    [timing] = events(tmp_path, "final_timing")
    assert timing["result"]["paired"] is None and "no paired timing" in timing["why"]
    assert "the report uses the search-time number" in (tmp_path / "r" / "log.txt").read_text()


def test_a_failed_re_evaluation_s_long_reason_is_cut_in_why(server, tmp_path):
    """The candidate writes most of a failed evaluation's reason: its first line, as long as it likes,
    reaches the journal's ``why``, the log, the terminal and the report only cut to 200 characters."""
    long_line = "output mismatch " + "A" * 20_000

    def failing_the_retime(request: EvalRequest) -> EvalResult:
        result = timed_verdict(request)
        if request.paired is not None:
            result = EvalResult(request_id=request.request_id, task=request.task, category="incorrect",
                                reason=long_line + "\nsecond line")
        return result

    result, _ = pikeh_run(server, tmp_path, verdict=failing_the_retime)
    assert result.exit_code == 0, result.output[-3000:]
    [timing] = events(tmp_path, "final_timing")
    assert timing["why"].startswith("the re-evaluation ended incorrect: output mismatch AAA")
    assert timing["why"].endswith("\u2026") and len(timing["why"]) <= len("the re-evaluation ended incorrect: ") + 200
    assert "second line" not in timing["why"]
    for text in (result.output, (tmp_path / "r" / "log.txt").read_text()):
        assert "A" * 201 not in text


def test_a_ctrl_c_during_the_final_retiming_loses_nothing_and_the_resume_times_it(server, tmp_path, monkeypatch):
    def interrupted_while_pairing(request: EvalRequest) -> EvalResult:
        if request.paired is not None:
            os.kill(os.getpid(), signal.SIGINT)
            # The re-timing is still going when the run sees the Ctrl-C: it ends only once the stopping run
            # closed the evaluator (a fixed sleep let a starved main thread see the re-timing end first).
            (evaluator,) = [e for e in plugin.built if any(r is request for r in e.requests)]
            deadline = time.monotonic() + 60
            while not evaluator.closed and time.monotonic() < deadline:
                time.sleep(0.01)
        return timed_verdict(request)

    # launch_run, not the CLI: an interrupted `pikeh run` ends its process (exit status 130).
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    plugin = fake_evaluator_plugin(interrupted_while_pairing)
    App._host = PluginHost(extra=[("fake", plugin, False)])
    try:
        core = {"strategy": "best-of-n", "suite": "smoke", "tasks": "4", "llm": "openai:fake", "query_budget": 3,
                "llm_base_url": server.openai_base_url, "output_dir": tmp_path, "run_name": "r"}
        status = launch_run(App(), core, {"parallel": 3}, {"evaluator": "fake"}, live=False)
    finally:
        App.reset()
    assert status == "interrupted"
    assert events(tmp_path, "final_timing") == [] and events(tmp_path, "task_end")
    [start] = [e for e in events(tmp_path, "eval_start") if e["key"].startswith("final/")]
    [abort] = [e for e in events(tmp_path, "eval_abort") if e["key"] == start["key"]]  # the journal stays exact
    assert events(tmp_path, "run_end")[-1]["status"] == "interrupted"
    sent = server.count()
    again, _ = pikeh_run(server, tmp_path)
    assert again.exit_code == 0, again.output[-3000:]
    assert server.count() == sent  # nothing asked again
    [timing] = events(tmp_path, "final_timing")
    assert timing["key"] == start["key"] and timing["result"]["paired"]["speedup"] == pytest.approx(2.5, rel=0.01)
