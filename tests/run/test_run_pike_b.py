"""Whole `pikeh run` tests: the real openai SDK talks to a loopback fake model, the scripted fake
evaluator judges its programs by their declared work (scripted_programs.py: the run loop is what these
test, real evaluation is tests/eval's), and the assertions read what the fake received and what the
journal kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from scripted_programs import TAG, ScriptedModel, program, quoted_tag, scripted_evaluator_plugin, serial_of

from pike_harness.host.store import read_journal
from pike_harness.kit import prompt_kinds, prompt_templates
from pike_harness.testing import invoke
from pike_harness.testing.llm_server import FakeLLMServer

# Phase-0 idea k sleeps this many ms per call; None is a broken program (a syntax error) to be fixed.
WORKS = [0, None, 200, 300, 400]
FIX_WORK = 20
BUDGET = 10


SCRIPTED_PIKEH = str(Path(__file__).resolve().parent / "scripted_pikeh.py")


def pikeh_cmd(server: FakeLLMServer, out: Path, *extra: str, budget: int = BUDGET, real: bool = False) -> list[str]:
    """``pikeh run`` on smoke/1 with the scripted evaluator, or (``real``) the installed ``local`` one."""
    launcher = ["-m", "pike_harness"] if real else [SCRIPTED_PIKEH]
    evaluator = [] if real else ["--evaluator", "scripted"]
    return [sys.executable, *launcher, "run", "--strategy", "pike-b", "--suite", "smoke",
            "--tasks", "1", "--llm", "openai:fake-coder", "--llm-base-url", server.openai_base_url,
            "--query-budget", str(budget), "--num-branches", "5", "--max-parents", "2",
            "--max-fix-attempts", "2", "--max-ideas", "5", "--device", "cpu", "--protocol", "quick",
            "--output-dir", str(out), "--run-name", "r", "--llm-concurrency", "5", *evaluator, *extra]


KEY = {"OPENAI_API_KEY": "sk-test-run-0123456789"}


def env(eval_seconds: float | None = None) -> dict[str, str]:
    """A ``pikeh run`` subprocess's environment; ``eval_seconds``: how long each scripted evaluation
    stays in flight (long enough for a test to interrupt one)."""
    seconds = {} if eval_seconds is None else {"SCRIPTED_EVAL_SECONDS": str(eval_seconds)}
    return {**os.environ, **KEY, **seconds, "PYTHONUNBUFFERED": "1"}


def in_process(cmd: list[str]) -> subprocess.CompletedProcess:
    """``cmd``'s ``pikeh run`` in this process, for tests that send no signal: no Python and torch
    start-up per run. The run loop is the same code; only the process boundary is skipped."""
    result = invoke(*cmd[cmd.index("run"):], plugins={"scripted": scripted_evaluator_plugin()}, env=KEY)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(cmd, result.exit_code, result.stdout, result.stderr)


def journal(out: Path) -> list[dict]:
    return read_journal(out / "r" / "journal.jsonl")


def kinds(server: FakeLLMServer) -> Counter[str]:
    return Counter(prompt_kinds.prompt_kind(r.prompt_text) for r in server.requests)


def test_pike_b_structure_seen_by_the_model(tmp_path):
    model = ScriptedModel(WORKS, fix_work=FIX_WORK)
    with FakeLLMServer(reply=model) as server:
        proc = in_process(pikeh_cmd(server, tmp_path))
        assert proc.returncode == 0, proc.stderr[-3000:]
        requests = list(server.requests)

    by_kind = defaultdict(list)
    for request in requests:
        by_kind[prompt_kinds.prompt_kind(request.prompt_text)].append(request)
    # One brainstorm, five phase-0 queries (one per idea), one fix for the broken sample only.
    assert len(by_kind["brainstorm"]) == 1
    assert sorted(r.prompt_text.split(prompt_templates.FOCUS_PREFIX)[1].split()[0] for r in by_kind["optimize"]) == [
        f"idea-{k}" for k in range(5)]
    assert [TAG.search(prompt_kinds.quoted_program(r.prompt_text)).group(1) for r in by_kind["fix"]] == ["i1"]
    # Phase 1: the two fastest correct children (i0 with no extra work, then the fixed i1), split 3/2.
    parents = Counter(TAG.search(prompt_kinds.quoted_program(r.prompt_text)).group(1) for r in by_kind["improve"])
    assert parents == {"i0": 3, "i1+fix": 2}
    # Budget: phase 0 used 6 (< 10) so phase 1 started and issued all 5: 11 counted queries, overshoot 1.
    events = journal(tmp_path)
    counted = sorted(e["index"] for e in events if e["type"] == "llm" and e["counted"])
    assert counted == list(range(1, 12))
    assert len(requests) == 12
    # Runtimes never reach a prompt.
    runtimes = [f"{e['runtime_ms']:.3f}" for e in events if e["type"] == "attempt" and e["runtime_ms"]]
    assert runtimes and not any(rt in r.prompt_text for r in requests for rt in runtimes)
    # Every attempt is on disk, human-readable, and the run is self-describing.
    run_dir = tmp_path / "r"
    attempt_dirs = sorted((run_dir / "tasks" / "smoke" / "1" / "attempts").iterdir())
    assert len(attempt_dirs) == 12  # brainstorm (free) + 11 counted
    assert (run_dir / "tasks" / "smoke" / "1" / "baseline_eager" / "result.json").exists()
    assert all((d / "prompt.md").exists() and (d / "response.md").exists() for d in attempt_dirs)
    assert all((d / "code.py").exists() and (d / "result.json").exists()
               for d in attempt_dirs if not d.name.startswith("free"))
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["config"]["strategy_options"]["num_branches"] == 5
    assert meta["environment"]["torch"] and meta["environment"]["cpu_count"]
    assert (run_dir / "best.py").exists() is False and (run_dir / "tasks/smoke/1/best.py").exists()
    assert (run_dir / "run.duckdb").exists()
    end = [e for e in events if e["type"] == "task_end"]
    assert end and end[0]["reason"] == "budget" and end[0]["queries_used"] == 11
    assert events[-1] == {**events[-1], "type": "run_end", "status": "complete"}


def test_pike_b_at_the_papers_shape_splits_3_3_2_2(tmp_path):
    """10 branches, 4 parents, as in the paper: phase 1's ten prompts quote the four fastest correct
    children of phase 0, the fastest two three times each and the next two twice each."""
    works = [0, 120, None, 40, 160, 200, 80, 240, 280, None]  # ideas 2 and 9 break, then get fixed (20 ms)
    with FakeLLMServer(reply=ScriptedModel(works, fix_work=20)) as server:
        cmd = pikeh_cmd(server, tmp_path, budget=20)
        for flag, value in (("--num-branches", "10"), ("--max-parents", "4"), ("--max-ideas", "10")):
            cmd[cmd.index(flag) + 1] = value
        proc = in_process(cmd)
        assert proc.returncode == 0, proc.stderr[-3000:]
        requests = list(server.requests)
    by_kind = defaultdict(list)
    for request in requests:
        by_kind[prompt_kinds.prompt_kind(request.prompt_text)].append(request)
    assert len(by_kind["brainstorm"]) == 1 and len(by_kind["optimize"]) == 10
    fixed = sorted(TAG.search(prompt_kinds.quoted_program(r.prompt_text)).group(1) for r in by_kind["fix"])
    assert fixed == ["i2", "i9"]  # fixes only for the failed samples
    parents = Counter(TAG.search(prompt_kinds.quoted_program(r.prompt_text)).group(1) for r in by_kind["improve"])
    assert len(by_kind["improve"]) == 10 and len(parents) == 4
    # i0 (no extra work) is fastest, the two fixed programs (20 ms) tie for 2nd/3rd, i3 (40 ms) is 4th.
    assert parents["i0"] == 3 and parents["i3"] == 2
    assert sorted([parents["i2+fix"], parents["i9+fix"]]) == [2, 3]
    counted = [e["index"] for e in journal(tmp_path) if e["type"] == "llm" and e["counted"]]
    assert sorted(counted) == list(range(1, 23))  # 10 + 2 fixes, then a full phase of 10: overshoot 2 <= 9


def test_phase_2_parents_are_the_four_fastest_of_phase_1_even_from_one_branch(tmp_path):
    """PIKE's parent rule through a real run: phase 1's two children of the fastest parent (branch 0)
    are its two fastest programs, and both become phase-2 parents beside the next two."""
    base = ScriptedModel([0, 100, 200, 300, 400])
    # Phase-1 children's extra work by parent tag, in the order the parent's children are asked for.
    child_works = {"i0": [0, 50], "i1": [150], "i2": [250], "i3": [350]}
    seen: Counter[str] = Counter()

    def reply(request):
        quoted = quoted_tag(request)
        if prompt_kinds.prompt_kind(request.prompt_text) == "improve" and quoted and quoted[0] in child_works:
            tag = quoted[0]
            seen[tag] += 1
            work = child_works[tag][seen[tag] - 1]
            return f"```python\n{program(f'{tag}>n{seen[tag]}', work)}```\n"
        return base(request)

    with FakeLLMServer(reply=reply) as server:
        cmd = pikeh_cmd(server, tmp_path, "--max-parents", "4", budget=11)
        del cmd[cmd.index("--max-parents"):cmd.index("--max-parents") + 2]  # the first, default 2
        proc = in_process(cmd)
        assert proc.returncode == 0, proc.stderr[-3000:]
        requests = list(server.requests)
    improves = [quoted_tag(r)[0] for r in requests if prompt_kinds.prompt_kind(r.prompt_text) == "improve"]
    phase1 = Counter(t for t in improves if ">" not in t)
    phase2 = Counter(t for t in improves if ">" in t)
    assert phase1 == {"i0": 2, "i1": 1, "i2": 1, "i3": 1}  # 5 queries over 4 parents: 2,1,1,1
    # The two children of i0 (0 and 50 ms of extra work) lead, then i1's (150) and i2's (250); i3's
    # child (350) is left out although it is the only child of its branch.
    assert phase2 == {"i0>n1": 2, "i0>n2": 1, "i1>n1": 1, "i2>n1": 1}
    assert len(requests) == 1 + 15  # brainstorm, then three phases of 5 (phase 2 starts at 10 < 11)


def test_fix_queries_are_never_sent_past_the_budget(tmp_path):
    """Every program fails to load and the budget is 15: 1 brainstorm, 10 optimize and 5 fix requests."""
    def reply(request):
        if prompt_kinds.prompt_kind(request.prompt_text) == "brainstorm":
            return "\n".join(f"- idea-{k}" for k in range(10))
        return f"```python\n{program('x', 0, broken=True)}```\n"

    with FakeLLMServer(reply=reply) as server:
        cmd = pikeh_cmd(server, tmp_path, budget=15)
        for flag, value in (("--num-branches", "10"), ("--max-fix-attempts", "5"), ("--max-ideas", "10")):
            cmd[cmd.index(flag) + 1] = value
        proc = in_process(cmd)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert kinds(server) == {"brainstorm": 1, "optimize": 10, "fix": 5}
    end = [e for e in journal(tmp_path) if e["type"] == "task_end"][0]
    assert end["reason"] == "budget" and end["queries_used"] == 15


def _wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_sigkill_at_several_points_then_resume(tmp_path):
    """Kill -9 while the 4th and the 9th request are in flight, then once during an evaluation; the
    resumed runs finish with every query answered exactly once in the journal and none re-sent after
    its answer was journaled."""
    holder: dict[str, subprocess.Popen] = {}
    kill_at = {4, 9}

    def on_request(serial: int) -> None:
        if serial in kill_at:
            holder["proc"].send_signal(signal.SIGKILL)

    model = ScriptedModel(WORKS, fix_work=FIX_WORK, on_request=on_request)
    with FakeLLMServer(reply=model) as server:
        def start(eval_seconds: float = 1.0) -> subprocess.Popen:
            holder["proc"] = subprocess.Popen(pikeh_cmd(server, tmp_path), env=env(eval_seconds),
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            return holder["proc"]

        for _ in kill_at:  # killed by the model at request 4, then at request 9
            assert start().wait(timeout=600) == -signal.SIGKILL
        # Third kill: while an evaluation is running (an eval_start with no eval yet).
        proc = start()

        def evaluating() -> bool:
            # Only this (third) process's evaluations: the two killed ones left eval_starts without an eval,
            # which made this true before this process had even written its run_start.
            events = journal(tmp_path)
            starts = [i for i, e in enumerate(events) if e["type"] == "run_start"]
            if len(starts) < 3:
                return False
            mine = events[starts[2]:]
            started = {e["key"] for e in mine if e["type"] == "eval_start"}
            done = {e["key"] for e in mine if e["type"] == "eval"}
            return bool(started - done) and len({e["key"] for e in events if e["type"] == "eval"}) >= 4

        _wait_for(evaluating)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL  # killed mid-run, not already finished
        final = start(eval_seconds=0)  # nothing is killed now: no evaluation needs to stay in flight
        output, _ = final.communicate(timeout=600)
        assert final.returncode == 0, output[-3000:]
        requests = list(server.requests)

    events = journal(tmp_path)
    llm = [e for e in events if e["type"] == "llm"]
    # Each query key answered exactly once in the journal. How many fit is the budget rule's (fix queries
    # are charged as verdicts arrive, so their count near the budget follows evaluation timing, killed
    # or not): every index from 1 up, no fix past the budget, optimize overshoot below 5 branches.
    assert len({e["key"] for e in llm}) == len(llm), sorted(e["key"] for e in llm)
    counted = sorted(e["index"] for e in llm if e["counted"])
    assert counted == list(range(1, len(counted) + 1)) and BUDGET <= len(counted) <= BUDGET + 5 - 1, (
        sorted(e["key"] for e in llm), [(e["key"], e["category"], e["reason"]) for e in events if e["type"] == "attempt"])
    assert all(e["index"] <= BUDGET for e in llm if e["counted"] and "/fix" in e["key"])
    attempts = [e for e in events if e["type"] == "attempt"]
    assert len({e["key"] for e in attempts}) == len(attempts) == len(counted)  # no attempt lost or doubled
    # Sends that never reached the journal were in flight when a kill came (at most the concurrency
    # limit per kill); every other send is exactly one journaled answer.
    journaled_serials = {serial_of(e["response"]["text"]) for e in llm}
    assert len(journaled_serials) == len(llm)
    unjournaled = set(range(1, len(requests) + 1)) - journaled_serials
    assert len(unjournaled) <= 3 * 5, sorted(unjournaled)
    # Each unjournaled send's prompt was sent again later and answered then (nothing lost). A send
    # the kill cut short reached the server without its body: there is no prompt to look for.
    for serial in sorted(s for s in unjournaled if requests[s - 1].prompt_text):
        later = [s for s in range(serial + 1, len(requests) + 1)
                 if requests[s - 1].prompt_text == requests[serial - 1].prompt_text and s in journaled_serials]
        assert later, (f"request {serial} ({prompt_kinds.prompt_kind(requests[serial - 1].prompt_text)}) was never "
                       f"answered into the journal; unjournaled: {sorted(unjournaled)}; "
                       f"llm errors: {[e for e in events if e['type'] == 'llm_error']}")
    # A finished run replays entirely from its journal: running it again sends nothing.
    with FakeLLMServer(reply=model) as server:
        again = in_process(pikeh_cmd(server, tmp_path))
        assert again.returncode == 0, again.stderr[-2000:]
        assert server.count() == 0
    events = journal(tmp_path)
    assert sum(e["type"] == "run_start" for e in events) == 5
    assert [e["status"] for e in events if e["type"] == "run_end"] == ["complete", "complete"]


def test_second_run_is_refused_and_changed_options_are_named(tmp_path):
    gate = {"hold": True}

    def slow(request):
        while gate["hold"]:
            time.sleep(0.05)
        return ScriptedModel(WORKS)(request)

    with FakeLLMServer(reply=slow) as server:
        first = subprocess.Popen(pikeh_cmd(server, tmp_path, budget=5), env=env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        _wait_for(lambda: server.count() >= 1)
        second = subprocess.run(pikeh_cmd(server, tmp_path, budget=5), env=env(), capture_output=True,
                                text=True, timeout=120)
        assert second.returncode != 0
        assert "is already active" in second.stderr and "Traceback" not in second.stderr
        gate["hold"] = False
        output, _ = first.communicate(timeout=600)
        assert first.returncode == 0, output[-2000:]
        changed = in_process(pikeh_cmd(server, tmp_path, "--num-branches", "4", budget=6))
    assert changed.returncode != 0
    assert "query_budget: was 5, now 6" in changed.stderr
    assert "strategy_options.num_branches: was 5, now 4" in changed.stderr


def test_ctrl_c_stops_cleanly_and_resumes(tmp_path):
    seen = {"n": 0}

    def reply(request):
        seen["n"] += 1
        if seen["n"] >= 3:
            time.sleep(0.5)
        return ScriptedModel(WORKS)(request)

    with FakeLLMServer(reply=reply) as server:
        proc = subprocess.Popen(pikeh_cmd(server, tmp_path), env=env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        _wait_for(lambda: server.count() >= 3)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, output[-2000:]
        assert "rerun the same command to resume" in output
        events = journal(tmp_path)
        assert events[-1]["type"] == "run_end" and events[-1]["status"] == "interrupted"
        resumed = in_process(pikeh_cmd(server, tmp_path))
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    events = journal(tmp_path)
    assert len([e for e in events if e["type"] == "attempt"]) == 11


def test_money_budget_stops_task(tmp_path):
    with FakeLLMServer(reply=ScriptedModel(WORKS)) as server:
        cmd = pikeh_cmd(server, tmp_path, "--money-budget", "0.000001")
        cmd[cmd.index("openai:fake-coder")] = "openai:gpt-4o-mini"
        proc = in_process(cmd)
        assert proc.returncode == 0, proc.stderr[-2000:]
        # Not even the uncounted brainstorm is sent: its worst case (prompt and --max-tokens) exceeds the
        # budget, so it is refused before it could spend anything (host/budget_ledger.py).
        assert server.count() == 0
    end = [e for e in journal(tmp_path) if e["type"] == "task_end"][0]
    assert end["reason"] == "budget" and end["queries_used"] == 0 and end["spend_usd"] == 0


def test_money_budget_on_unpriced_model_is_refused(tmp_path):
    with FakeLLMServer(reply=ScriptedModel(WORKS)) as server:
        proc = in_process(pikeh_cmd(server, tmp_path, "--money-budget", "1"))
        assert server.count() == 0
    assert proc.returncode != 0 and "openai:fake-coder has none" in proc.stderr


@pytest.mark.skipif(bool(__import__("torch").cuda.is_available()), reason="needs a host without CUDA")
def test_an_evaluator_that_cannot_start_is_a_one_line_error_before_any_query(tmp_path):
    with FakeLLMServer(reply=ScriptedModel(WORKS)) as server:
        command = [a if a != "cpu" else "cuda" for a in pikeh_cmd(server, tmp_path, real=True)]
        proc = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=120)
        assert server.count() == 0
    assert proc.returncode == 1, proc.stderr
    assert "evaluator 'local': no CUDA device is available here" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()


def test_a_query_that_failed_for_good_is_replayed_as_failed_on_resume(tmp_path):
    """The first optimize request fails with a 422 (refused for good, but not a dead key or endpoint); the
    run is cut right after that attempt (a SIGKILL there leaves exactly this journal) and resumed: the
    failed query is not asked again, and the journal keeps one verdict for it."""
    from pike_harness.testing.llm_server import FakeReply

    model = ScriptedModel(WORKS)
    state = {"failed": False}

    def reply(request):
        if not state["failed"] and prompt_kinds.prompt_kind(request.prompt_text) == "optimize":
            state["failed"] = True
            return FakeReply(status=422, error_message="this request cannot be processed")
        return model(request)

    with FakeLLMServer(reply=reply) as server:
        first = in_process(pikeh_cmd(server, tmp_path, budget=4))
        assert first.returncode == 3, first.stderr  # complete, with an LLM error: said in the exit status
        events = journal(tmp_path)
        failed = next(e for e in events if e["type"] == "llm_error")
        cut = next(i for i, e in enumerate(events) if e["type"] == "attempt" and e["key"] == failed["key"])
        path = tmp_path / "r" / "journal.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events[:cut + 1]))
        asked = server.count()
        dropped = sum(e["type"] in ("llm", "llm_error") for e in events[cut + 1:])  # answers the cut lost
        resumed = in_process(pikeh_cmd(server, tmp_path, budget=4))
        assert resumed.returncode == 3, resumed.stderr
    events = journal(tmp_path)
    mine = [e for e in events if e.get("key") == failed["key"] and e["type"] in ("llm", "llm_error", "attempt")]
    assert [e["type"] for e in mine] == ["llm_error", "attempt"], "asked once, one verdict"
    assert server.count() == asked + dropped, "exactly the queries whose answers were cut are asked again"
