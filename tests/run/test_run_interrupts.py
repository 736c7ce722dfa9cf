"""Ctrl-C never records a false result: a real `pikeh run` subprocess gets real SIGINTs (once, twice,
during an LLM wait and during an evaluation) from a loopback fake model with scripted answers, judged
by the scripted evaluator (each evaluation in flight for a second, so one can be interrupted); after
the resume every attempt's category equals an uninterrupted run's, and no evaluation is left without
its verdict or its ``eval_abort`` in any process's part of the journal."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from scripted_programs import ScriptedModel
from test_run_pike_b import WORKS, _wait_for, env, in_process, pikeh_cmd

from pike_harness.host.journal_reading import read_journal
from pike_harness.testing.llm_server import FakeLLMServer


def _events(out: Path) -> list[dict]:
    return read_journal(out / "r" / "journal.jsonl")


def _segments(events: list[dict]) -> list[list[dict]]:
    """The journal split per process (each begins with run_start)."""
    parts: list[list[dict]] = []
    for event in events:
        if event["type"] == "run_start":
            parts.append([])
        if parts:
            parts[-1].append(event)
    return parts


def _assert_exact(events: list[dict]) -> None:
    """In every process that wrote run_end, each eval_start has its eval, eval_abort or final_timing (a final
    re-timing's end) before run_end."""
    for number, part in enumerate(_segments(events), start=1):
        assert part[-1]["type"] == "run_end", f"process {number} ended without run_end"
        open_evals: Counter = Counter()
        for event in part:
            key = (event.get("task"), event.get("key"))
            if event["type"] == "eval_start":
                open_evals[key] += 1
            elif event["type"] in ("eval", "eval_abort", "final_timing") and open_evals[key]:
                open_evals[key] -= 1
        assert not +open_evals, f"process {number} left evaluations without an end: {dict(+open_evals)}"


def _categories(events: list[dict]) -> dict[str, str]:
    return {e["key"]: e["category"] for e in events if e["type"] == "attempt"}


def _collect(proc: subprocess.Popen) -> dict:
    """Read the process's output in a thread, so a test can wait for a line while it runs."""
    said: dict = {"text": ""}

    def read() -> None:
        for line in proc.stdout:
            said["text"] += line

    said["thread"] = threading.Thread(target=read, daemon=True)
    said["thread"].start()
    return said


@pytest.mark.slow
def test_sigint_at_many_points_changes_no_category(tmp_path):
    reference_dir, out = tmp_path / "reference", tmp_path / "interrupted"
    with FakeLLMServer(reply=ScriptedModel(WORKS, fix_work=20)) as server:
        done = in_process(pikeh_cmd(server, reference_dir))
        assert done.returncode == 0, done.stderr[-3000:]
    expected = _categories(_events(reference_dir))
    assert len(expected) == 11

    holder: dict = {"slow_from": None, "release": threading.Event()}

    def on_request(serial: int) -> None:
        if serial == holder.get("sigint_at"):
            holder["proc"].send_signal(signal.SIGINT)
        if holder["slow_from"] is not None and serial >= holder["slow_from"]:
            # Answers still being generated when the stop comes and when the second Ctrl-C abandons them:
            # held until that process has ended (a fixed 8 s could run out first on a loaded runner).
            holder["release"].wait(timeout=600)

    model = ScriptedModel(WORKS, fix_work=20, on_request=on_request)
    outputs = []
    with FakeLLMServer(reply=model) as server:
        def start() -> subprocess.Popen:
            holder["proc"] = subprocess.Popen(pikeh_cmd(server, out), env=env(1.0), stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True)
            return holder["proc"]

        def finish(proc: subprocess.Popen) -> str:
            output, _ = proc.communicate(timeout=300)
            outputs.append(output)
            assert proc.returncode == 130, output[-3000:]
            assert "Traceback" not in output and "Aborted!" not in output, output[-3000:]
            assert _events(out)[-1] == {**_events(out)[-1], "type": "run_end", "status": "interrupted"}
            return output

        # 1. Ctrl-C twice while the optimize answers are slow: the grace wait says what it waits for,
        # the second Ctrl-C abandons it, and the journal still closes properly with run_end.
        holder["slow_from"] = 2
        proc = start()
        _wait_for(lambda: len(server.requests) >= 3, timeout=300)
        proc.send_signal(signal.SIGINT)
        said = _collect(proc)
        _wait_for(lambda: "Ctrl-C again to abandon them" in said["text"], timeout=60)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        holder["release"].set()  # the held answers go to a process that is gone
        said["thread"].join(timeout=10)
        output = said["text"]
        outputs.append(output)
        assert proc.returncode == 130, output[-3000:]
        assert "waiting up to 15 s for" in output and "abandoned" in output, output[-3000:]
        assert "Traceback" not in output and "Aborted!" not in output, output[-3000:]
        assert _events(out)[-1] == {**_events(out)[-1], "type": "run_end", "status": "interrupted"}
        holder["slow_from"] = None
        # 2. One Ctrl-C while an evaluation runs (an eval_start with no verdict yet).
        proc = start()

        def evaluating() -> bool:
            events = _events(out)
            started = Counter(e["key"] for e in events if e["type"] == "eval_start")
            ended = Counter(e["key"] for e in events if e["type"] in ("eval", "eval_abort"))
            return sum(e["type"] == "run_start" for e in events) == 2 and bool(started - ended)

        _wait_for(evaluating)
        proc.send_signal(signal.SIGINT)
        finish(proc)
        # 3. One Ctrl-C while a later request (a fix or an improve query) is being answered.
        holder["sigint_at"] = len(server.requests) + 2
        finish(start())
        # The resume, with prompt answers again.
        holder["slow_from"] = None
        final = in_process(pikeh_cmd(server, out))
        assert final.returncode == 0, final.stderr[-3000:]

    events = _events(out)
    _assert_exact(events)
    assert not [e for e in events if e["type"] == "attempt" and e.get("check") == "interrupted"]
    assert sum(e["type"] == "eval_abort" for e in events) >= 1  # the stop during an evaluation aborted it
    assert _categories(events) == expected
    attempts = [e for e in events if e["type"] == "attempt"]
    assert len({e["key"] for e in attempts}) == len(attempts), "one verdict per attempt"
