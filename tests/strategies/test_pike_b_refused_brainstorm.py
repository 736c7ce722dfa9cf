"""PIKE-B when the provider refuses the brainstorm prompt: the task goes on without ideas.

Whole `pikeh run`s in this process: the real openai SDK talks to the loopback fake model, which answers
the brainstorm prompt with OpenAI's HTTP 400 for a prompt longer than the context window (a
``PromptRefusedError``); the fake evaluator judges. The refusal is journaled as refused, phase 0 sends
exactly the prompts a ``--no-brainstorm`` run sends, and a resume neither asks the brainstorm again nor
takes another path.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pike_harness.host.store import read_journal
from pike_harness.kit import prompt_kinds, prompt_templates
from pike_harness.testing import FakeLLMServer, FakeReply, ReceivedRequest, fake_evaluator_plugin, invoke

TOO_LONG = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                 "resulted in 130512 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
PROGRAM = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
KEY = {"OPENAI_API_KEY": "sk-test-refused-brainstorm-0123456789"}


def refuse_brainstorm(request: ReceivedRequest) -> FakeReply:
    if prompt_kinds.prompt_kind(request.prompt_text) == "brainstorm":
        return FakeReply(status=400, body=TOO_LONG)
    return FakeReply.code(PROGRAM)


def pikeh_run(server: FakeLLMServer, out: Path, name: str, *extra: str):
    result = invoke("run", "--strategy", "pike-b", "--suite", "smoke", "--tasks", "1",
                    "--llm", "openai:fake-coder", "--llm-base-url", server.openai_base_url,
                    "--query-budget", "6", "--num-branches", "3", "--max-parents", "2", "--max-ideas", "3",
                    "--max-fix-attempts", "1", "--evaluator", "fake", "--output-dir", str(out),
                    "--run-name", name, *extra, plugins={"fake": fake_evaluator_plugin()}, env=KEY)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def journal(out: Path, name: str) -> list[dict]:
    return read_journal(out / name / "journal.jsonl")


def kinds(server: FakeLLMServer) -> Counter[str | None]:
    return Counter(prompt_kinds.prompt_kind(r.prompt_text) for r in server.requests)


def asked_prompts(server: FakeLLMServer) -> list[str]:
    """Every prompt but the brainstorm, in a fixed order (queries run concurrently)."""
    return sorted(r.prompt_text for r in server.requests if prompt_kinds.prompt_kind(r.prompt_text) != "brainstorm")


def assert_refused_once(events: list[dict]) -> None:
    (failure,) = [e for e in events if e["type"] == "llm_error"]
    assert failure["key"] == "brainstorm" and failure["role"] == "brainstorm" and failure["counted"] is False
    assert failure["refused"] is True and failure["cost_usd"] == 0.0 and failure["status"] == 400
    assert "maximum context length is 128000 tokens" in failure["error"]


def outcome(events: list[dict]) -> tuple[list, list, list]:
    """What a run did: its answered queries, its attempts and how its task ended."""
    answered = sorted((e["key"], e["index"], e["counted"]) for e in events if e["type"] == "llm")
    attempts = sorted((e["key"], e["category"], e["parent"], sorted(e["meta"].items()))
                      for e in events if e["type"] == "attempt")
    ends = [(e["task"], e["reason"], e["queries_used"]) for e in events if e["type"] == "task_end"]
    return answered, attempts, ends


def test_a_refused_brainstorm_leaves_phase_0_as_without_brainstorming(tmp_path):
    with FakeLLMServer(reply=refuse_brainstorm) as server:
        refused = pikeh_run(server, tmp_path, "refused")
        assert refused.exit_code == 0, refused.output[-3000:]
        assert kinds(server)["brainstorm"] == 1  # asked once: the same prompt gets the same refusal
        assert kinds(server)["optimize"] == 3 and kinds(server)["improve"] == 3  # phases 0 and 1 ran
        prompts = asked_prompts(server)
        assert not any(prompt_templates.FOCUS_PREFIX in p for p in prompts)  # no idea in any prompt
    events = journal(tmp_path, "refused")
    assert_refused_once(events)
    answered, attempts, ends = outcome(events)
    assert [key for key, _, _ in answered] == ["p000/s00", "p000/s01", "p000/s02",
                                               "p001/s00", "p001/s01", "p001/s02"]
    assert all(category == "correct" for _, category, _, _ in attempts)
    assert ends == [("smoke/1", "budget", 6)]
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "complete"
    log = (tmp_path / "refused" / "log.txt").read_text()
    assert "smoke/1 brainstorm: the provider refused the prompt (" in log
    assert "phase 0 goes on without ideas" in log

    # The same run with brainstorming off sends the same prompts and ends the same way.
    with FakeLLMServer(reply=refuse_brainstorm) as server:
        off = pikeh_run(server, tmp_path, "off", "--no-brainstorm")
        assert off.exit_code == 0, off.output[-3000:]
        assert kinds(server)["brainstorm"] == 0
        assert asked_prompts(server) == prompts
    assert outcome(journal(tmp_path, "off")) == (answered, attempts, ends)


def test_a_resume_after_the_refusal_goes_on_without_asking_the_brainstorm_again(tmp_path):
    with FakeLLMServer(reply=refuse_brainstorm) as server:
        first = pikeh_run(server, tmp_path, "r")
        assert first.exit_code == 0, first.output[-3000:]
    path = tmp_path / "r" / "journal.jsonl"
    finished = journal(tmp_path, "r")
    # The process dies right after journaling the refusal: the journal ends at that line.
    lines = path.read_text().splitlines(keepends=True)
    (cut,) = [n for n, line in enumerate(lines) if '"llm_error"' in line]
    path.write_text("".join(lines[:cut + 1]))

    with FakeLLMServer(reply=refuse_brainstorm) as server:
        resumed = pikeh_run(server, tmp_path, "r")
        assert resumed.exit_code == 0, resumed.output[-3000:]
        assert kinds(server) == {"optimize": 3, "improve": 3}  # the refused brainstorm was not asked again
        assert not any(prompt_templates.FOCUS_PREFIX in r.prompt_text for r in server.requests)
    events = journal(tmp_path, "r")
    assert_refused_once(events)  # replayed, not journaled a second time
    assert outcome(events) == outcome(finished)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "complete"
