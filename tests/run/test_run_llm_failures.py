"""A dead key or endpoint never burns the budget: real `pikeh run` subprocesses against a loopback
fake that refuses (401) or keeps failing (503), then the same command (in process) against a working
model."""

from __future__ import annotations

import subprocess

from scripted_programs import ScriptedModel
from test_run_pike_b import WORKS, env, in_process, journal, pikeh_cmd

from pike_harness.kit import prompt_kinds
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply


def test_401_stops_at_once_charges_nothing_and_the_resume_gets_the_whole_budget(tmp_path):
    with FakeLLMServer(reply=lambda request: FakeReply(status=401, error_message="invalid api key")) as server:
        proc = subprocess.run(pikeh_cmd(server, tmp_path), env=env(), capture_output=True, text=True, timeout=600)
        refused = server.count()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "HTTP 401" in proc.stderr and "nothing was charged" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "r: results" in proc.stdout and "results" not in proc.stderr  # results on stdout, progress on stderr
    assert refused <= 1 + 5  # the brainstorm, or at most one wave of concurrent queries; never the budget
    events = journal(tmp_path)
    assert not [e for e in events if e["type"] in ("llm", "llm_error", "attempt")]
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "failed" and "401" in events[-1]["why"]
    with FakeLLMServer(reply=ScriptedModel(WORKS)) as server:
        resumed = in_process(pikeh_cmd(server, tmp_path))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    counted = sorted(e["index"] for e in journal(tmp_path) if e["type"] == "llm" and e["counted"])
    assert counted == list(range(1, 12))  # the same 11 counted queries as a run that never saw a 401


def test_a_failing_endpoint_stops_the_run_and_retry_llm_errors_asks_again(tmp_path):
    failing = FakeReply(status=503, error_message="overloaded", headers={"Retry-After": "0"})
    model = ScriptedModel(WORKS)

    def reply(request):  # the brainstorm gets its ideas; then the endpoint keeps failing
        return model(request) if prompt_kinds.prompt_kind(request.prompt_text) == "brainstorm" else failing

    with FakeLLMServer(reply=reply) as server:
        proc = subprocess.run(pikeh_cmd(server, tmp_path, "--max-llm-failures", "3"), env=env(),
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "3 LLM queries in a row failed" in proc.stderr and "--retry-llm-errors" in proc.stderr
    failed = [e for e in journal(tmp_path) if e["type"] == "llm_error"]
    assert 3 <= len(failed) <= 1 + 5, "stopped after the streak, not after the budget"
    with FakeLLMServer(reply=ScriptedModel(WORKS)) as server:
        plain = in_process(pikeh_cmd(server, tmp_path))
        assert plain.returncode == 3, plain.stderr[-3000:]  # completed, with LLM errors: said and not 0
        assert "ended with an LLM error" in plain.stderr
        again = in_process(pikeh_cmd(server, tmp_path, "--retry-llm-errors"))
        assert again.returncode == 0, again.stderr[-3000:]
    events = journal(tmp_path)
    answered = {e["key"] for e in events if e["type"] == "llm"}
    assert {e["key"] for e in failed} <= answered  # every failed query was asked again and answered
    latest = {e["key"]: e["category"] for e in events if e["type"] == "attempt"}
    assert "llm_error" not in latest.values()
