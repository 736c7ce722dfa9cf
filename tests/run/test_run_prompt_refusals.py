"""An HTTP 400 about one prompt fails that query and the run goes on; one about the run's setup stops it.

Whole PIKE-B runs (the real openai and anthropic SDKs against the loopback fake, the scripted evaluator)
where the provider refuses phase 0's idea-2 prompt as too long, with the error body each API really
sends. That query is journaled as refused (not billed), the search continues, and no resume asks it
again (the server's request log says so). An unknown model, answered to the phase-1 prompts, still
stops the run with the provider's own words.
"""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest
from scripted_programs import ScriptedModel
from test_run_pike_b import WORKS, env, in_process, journal, pikeh_cmd

from pike_harness.host.llm_health import LLMHealth
from pike_harness.kit import prompt_kinds, prompt_templates
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply, ReceivedRequest

APIS = ("openai", "anthropic")

# What each API answers a prompt longer than the model's context window (HTTP 400).
TOO_LONG = {
    "openai": {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                    "resulted in 130512 tokens. Please reduce the length of the messages.",
                         "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error",
                                             "message": "prompt is too long: 215000 tokens > 200000 maximum"}},
}
# What each API answers a model it does not serve, as a 400 (OpenAI-compatible gateways do; Anthropic
# names the model field).
UNKNOWN_MODEL = {
    "openai": {"error": {"message": "The requested model 'fake-coder' does not exist.",
                         "type": "invalid_request_error", "param": "model", "code": "model_not_found"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "model: fake-coder"}},
}


def command(api: str, server: FakeLLMServer, out, *extra: str) -> list[str]:
    """test_run_pike_b's run, with the model behind ``api``."""
    cmd = pikeh_cmd(server, out, *extra)
    if api == "anthropic":
        cmd[cmd.index("openai:fake-coder")] = "anthropic:fake-coder"
        cmd[cmd.index(server.openai_base_url)] = server.anthropic_base_url
    return cmd


def step(request: ReceivedRequest) -> str | None:
    """``idea-2`` for phase 0's query on that idea; otherwise the prompt's kind."""
    kind = prompt_kinds.prompt_kind(request.prompt_text)
    if kind == "optimize":
        return request.prompt_text.split(prompt_templates.FOCUS_PREFIX)[1].split()[0]
    return kind


def model(api: str, *, improve: FakeReply | None = None):
    """The scripted model, except that idea-2's prompt is too long, and ``improve`` answers phase 1."""
    scripted = ScriptedModel(WORKS)

    def reply(request: ReceivedRequest) -> FakeReply:
        kind = step(request)
        if kind == "idea-2":
            return FakeReply(status=400, body=TOO_LONG[api])
        if kind == "improve" and improve is not None:
            return improve
        return scripted(request)

    return reply


def subprocess_run(cmd: list[str]) -> subprocess.CompletedProcess:
    """A run as a user runs it, in its own process: one stopped on an error leaves its process at once
    (os._exit, with queries still waiting), which would take a test's process with it."""
    return subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600)


@pytest.fixture
def anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-run-0123456789")


def refused_events(out) -> list[dict]:
    return [e for e in journal(out) if e["type"] == "llm_error"]


def assert_idea_2_refused_once(api: str, out) -> None:
    (event,) = refused_events(out)
    assert event["refused"] is True and event["cost_usd"] == 0.0 and event["status"] == 400
    assert event["retries"] == [] and TOO_LONG[api]["error"]["message"][:30] in event["error"]
    (attempt,) = [e for e in journal(out) if e["type"] == "attempt" and e["key"] == event["key"]]
    assert attempt["category"] == "llm_error" and attempt["reason"].startswith("prompt refused (not billed)")


@pytest.mark.parametrize("api", APIS)
def test_a_prompt_too_long_fails_that_query_and_the_run_completes(api: str, tmp_path, anthropic_key):
    with FakeLLMServer(reply=model(api)) as server:
        proc = subprocess_run(command(api, server, tmp_path))
        asked = Counter(step(r) for r in server.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 query failed because the provider refused the prompt" in proc.stderr
    assert asked["idea-2"] == 1  # not retried: the same prompt gets the same refusal
    assert asked["improve"] == 5  # the search went on to phase 1
    assert_idea_2_refused_once(api, tmp_path)
    events = journal(tmp_path)
    counted = sorted([e["index"] for e in events if e["type"] in ("llm", "llm_error") and e["counted"]])
    assert counted == list(range(1, 12))  # the refused query counted, as any query asked
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "complete"

    # Neither a plain resume nor --retry-llm-errors asks the refused prompt again.
    for extra in ((), ("--retry-llm-errors",)):
        with FakeLLMServer(reply=model(api)) as server:
            again = in_process(command(api, server, tmp_path, *extra))
            assert again.returncode == 0, again.stderr[-3000:]
            assert server.count() == 0
    assert_idea_2_refused_once(api, tmp_path)


@pytest.mark.parametrize("api", APIS)
def test_an_unknown_model_still_stops_the_run_and_the_resume_skips_the_refused_prompt(api: str, tmp_path,
                                                                                     anthropic_key):
    unknown = FakeReply(status=400, body=UNKNOWN_MODEL[api])
    with FakeLLMServer(reply=model(api, improve=unknown)) as server:
        proc = subprocess_run(command(api, server, tmp_path))
        asked = Counter(step(r) for r in server.requests)
    assert proc.returncode == 1, proc.stderr[-3000:]
    said = UNKNOWN_MODEL[api]["error"]["message"]
    assert f"HTTP 400: {said}" in proc.stderr and "nothing was charged" in proc.stderr
    assert "run's setup" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert asked["idea-2"] == 1 and asked["improve"] >= 1
    events = journal(tmp_path)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "failed" and said in events[-1]["why"]
    assert_idea_2_refused_once(api, tmp_path)  # the refused setup's queries are not journaled: not charged

    with FakeLLMServer(reply=model(api)) as server:  # the model fixed; idea-2's prompt is as long as ever
        resumed = in_process(command(api, server, tmp_path))
        asked = Counter(step(r) for r in server.requests)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert asked == {"improve": 5}  # phase 1 asked again; the refused prompt not
    assert_idea_2_refused_once(api, tmp_path)
    assert journal(tmp_path)[-1]["status"] == "complete"


def test_a_streak_of_refused_prompts_stops_the_run_with_advice_of_its_own():
    """One refused prompt is that query's bad luck; --max-llm-failures of them in a row means the model
    takes none of the run's prompts, and asking the same ones again (--retry-llm-errors) would not help."""
    stops: list[str] = []
    health = LLMHealth(3, stops.append)
    health.failed("prompt is too long", refused=True)
    health.answered()  # an answer in between: the streak starts again
    for _ in range(3):
        health.failed("prompt is too long", refused=True)
    (refused,) = stops
    assert "refused the prompts of 3 LLM queries in a row" in refused and "--max-tokens" in refused
    assert "--retry-llm-errors" not in refused
    health.answered()
    for refused_too in (True, False, True):  # a mixed streak is a failing endpoint as before
        health.failed("HTTP 503", refused=refused_too)
    assert "3 LLM queries in a row failed" in stops[-1] and "--retry-llm-errors" in stops[-1]
