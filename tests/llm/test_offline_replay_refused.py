"""offline:replay refuses again what the recorded run's provider refused: a ``PromptRefusedError`` with
the recorded message, so a replayed run takes the path the original took.

The recordings are real: a client (or a whole `pikeh run`) talks to the loopback fake model, which
answers one prompt with OpenAI's HTTP 400 for a prompt longer than the context window.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_test_helpers import FAST, host

from pike_harness.contracts.journal import LLMAnswer, LLMFailure
from pike_harness.contracts.llm import (
    BackendOptions,
    GenerationParams,
    LLMError,
    LLMRequest,
    PromptRefusedError,
)
from pike_harness.host.llm_client import LLMClient
from pike_harness.host.store import read_journal
from pike_harness.kit import prompt_kinds
from pike_harness.testing import FakeReply, ReceivedRequest, fake_evaluator_plugin, invoke
from pike_harness.testing.llm_server import FakeLLMServer

TASK = "smoke/1"
TOO_LONG = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                 "resulted in 130512 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def _request(text: str, role: str = "optimize", key: str | None = None) -> LLMRequest:
    return LLMRequest(messages=[{"role": "user", "content": text}], role=role, key=key,
                      params=GenerationParams(seed=1))


def refuse_long(request: ReceivedRequest) -> FakeReply:
    if "very long" in request.prompt_text:
        return FakeReply(status=400, body=TOO_LONG)
    return FakeReply(text=f"answer to {request.prompt_text}")


@pytest.fixture
def recorded(llm_server: FakeLLMServer, keys, tmp_path: Path) -> Path:
    """A journal written as the run loop writes it: an answered query, three whose prompt openai
    refused (one asked as brainstorm; the last is the answered prompt asked again, refused this time),
    then one that failed for another reason."""
    llm_server.set_reply(refuse_long)
    client = LLMClient("openai:gpt-5", options=BackendOptions(base_url=llm_server.openai_base_url), host=host(),
                       retry=FAST)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events: list[dict] = [{"type": "run_start"}]
    queries = [("brainstorm", _request("a very long brainstorm", role="brainstorm")),
               ("p000/s00", _request("optimize A")),
               ("p000/s01", _request("a very long optimize prompt")),
               ("p000/s03", _request("optimize A"))]
    for key, request in queries:
        request.key = f"{TASK}#{key}"
        if key == "p000/s03":
            llm_server.script(FakeReply(status=400, body=TOO_LONG))
        try:
            response = client.complete(request)
        except PromptRefusedError as exc:
            events.append(LLMFailure(task=TASK, key=key, role=request.role, index=None, counted=False,
                                     error=str(exc), status=exc.status, refused=True, cost_usd=0.0).to_dict())
            continue
        events.append(LLMAnswer(task=TASK, key=key, role=request.role, index=1, counted=True,
                                request_sha256=client.request_hash(request), response=response.to_dict()).to_dict())
    events.append(LLMFailure(task=TASK, key="p000/s02", role="optimize", index=2, counted=True,
                             error="openai:gpt-5: gave up after 4 tries: HTTP 503", status=503).to_dict())
    (run_dir / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert llm_server.count() == 4
    return run_dir


def test_a_recorded_refusal_is_replayed_as_a_refusal(recorded: Path, llm_server: FakeLLMServer):
    client = LLMClient(f"offline:replay={recorded}", host=host(), retry=FAST)
    recorded_errors = {e["key"]: e for e in read_journal(recorded / "journal.jsonl") if e["type"] == "llm_error"}
    for key, role, text in (("brainstorm", "brainstorm", "a very long brainstorm"),
                            ("p000/s01", "optimize", "a very long optimize prompt"),
                            ("p000/s03", "optimize", "optimize A")):  # its key's refusal, not p000/s00's answer
        with pytest.raises(PromptRefusedError) as info:
            client.complete(_request(text, role=role, key=f"{TASK}#{key}"))
        assert str(info.value) == recorded_errors[key]["error"] and info.value.status == 400
        assert "maximum context length is 128000 tokens" in str(info.value) and info.value.retries == []
    answered = client.complete(_request("optimize A", key=f"{TASK}#p000/s00"))
    assert answered.text == "answer to optimize A" and answered.replayed

    # Only the refused query is refused. It is found by its key (the journal keeps no hash of a refused
    # request): another key, no key, or another role is an unknown request; a failure of another kind
    # (retries spent) is not replayed.
    for request in (_request("a very long brainstorm", role="brainstorm", key=f"{TASK}#p009/s09"),
                    _request("a very long brainstorm", role="brainstorm"),
                    _request("a very long brainstorm", role="optimize", key=f"{TASK}#brainstorm"),
                    _request("optimize B", key=f"{TASK}#p000/s02")):
        with pytest.raises(LLMError, match="no recorded answer") as unknown:
            client.complete(request)
        assert not isinstance(unknown.value, PromptRefusedError)
    assert llm_server.count() == 4  # nothing more was sent


def test_a_journal_of_refusals_alone_replays(tmp_path: Path):
    event = LLMFailure(task=TASK, key="brainstorm", role="brainstorm", index=None, counted=False,
                       error="openai:gpt-5: HTTP 400: prompt too long", status=400, refused=True, cost_usd=0.0)
    (tmp_path / "journal.jsonl").write_text(json.dumps(event.to_dict()) + "\n")
    client = LLMClient(f"offline:replay={tmp_path}", host=host(), retry=FAST)
    with pytest.raises(PromptRefusedError, match="prompt too long"):
        client.complete(_request("anything", role="brainstorm", key=f"{TASK}#brainstorm"))


# -- a whole run, recorded and replayed ----------------------------------------------------------------

def refuse_brainstorm(request: ReceivedRequest) -> FakeReply:
    if prompt_kinds.prompt_kind(request.prompt_text) == "brainstorm":
        return FakeReply(status=400, body=TOO_LONG)
    return FakeReply.code("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n")


def pikeh_run(out: Path, name: str, *llm: str):
    result = invoke("run", "--strategy", "pike-b", "--suite", "smoke", "--tasks", "1", *llm,
                    "--query-budget", "6", "--num-branches", "3", "--max-parents", "2", "--max-ideas", "3",
                    "--max-fix-attempts", "1", "--evaluator", "fake", "--output-dir", str(out), "--run-name", name,
                    plugins={"fake": fake_evaluator_plugin()}, env={"OPENAI_API_KEY": "sk-test-replay-0123456789"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def outcome(run_dir: Path) -> tuple[list, dict, list]:
    events = read_journal(run_dir / "journal.jsonl")
    failures = sorted((e["key"], e["role"], e["error"], e["status"], e["refused"], e["cost_usd"])
                      for e in events if e["type"] == "llm_error")
    answers = {e["key"]: e["response"]["text"] for e in events if e["type"] == "llm"}
    attempts = sorted((e["key"], e["category"], e["parent"]) for e in events if e["type"] == "attempt")
    return failures, answers, attempts


def test_a_run_whose_brainstorm_was_refused_replays_the_same(tmp_path: Path, keys):
    with FakeLLMServer(reply=refuse_brainstorm) as server:
        first = pikeh_run(tmp_path, "recorded", "--llm", "openai:fake-coder", "--llm-base-url",
                          server.openai_base_url)
        assert first.exit_code == 0, first.output[-3000:]
    recorded = outcome(tmp_path / "recorded")
    assert [(key, refused) for key, _, _, _, refused, _ in recorded[0]] == [("brainstorm", True)]

    replay = pikeh_run(tmp_path, "replayed", "--llm", "offline:replay", "--replay-dir", str(tmp_path / "recorded"))
    assert replay.exit_code == 0, replay.output[-3000:]
    assert outcome(tmp_path / "replayed") == recorded  # the same refusal, answers and attempts
    log = (tmp_path / "replayed" / "log.txt").read_text()
    assert "brainstorm: the provider refused the prompt (" in log
