"""offline:replay answers a recorded run's requests from its journal, exactly and without a network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_test_helpers import FAST, host

from pike_harness.contracts.llm import BackendOptions, GenerationParams, LLMError, LLMRequest
from pike_harness.errors import UserError
from pike_harness.host.llm_client import LLMClient
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply

TASK = "smoke/1"


def _request(text: str, role: str = "optimize", key: str | None = None, seed: int | None = None) -> LLMRequest:
    return LLMRequest(messages=[{"role": "user", "content": text}], role=role, key=key,
                      params=GenerationParams(seed=seed))


def record(client: LLMClient, run_dir: Path, queries: list[tuple[str, LLMRequest]]) -> list[str]:
    """Ask each query and journal it the way the run loop does; returns the answers."""
    run_dir.mkdir(parents=True, exist_ok=True)
    answers = []
    with (run_dir / "journal.jsonl").open("a") as journal:
        journal.write(json.dumps({"type": "run_start"}) + "\n")
        for key, request in queries:
            response = client.complete(request)
            answers.append(response.text)
            journal.write(json.dumps({"type": "llm", "task": TASK, "key": key,
                                      "request_sha256": client.request_hash(request),
                                      "response": response.to_dict()}) + "\n")
    return answers


@pytest.fixture
def recorded(llm_server: FakeLLMServer, keys, tmp_path: Path):
    """A run that asked openai for optimizations and anthropic (the cheap EFA) for fixes."""
    llm_server.set_reply(lambda request: FakeReply(text=f"answer {len(llm_server.requests)}",
                                                   prompt_tokens=100, output_tokens=50))
    client = LLMClient("openai:gpt-5", role_models={"fix": "anthropic:claude-haiku-4-5"},
                       options=BackendOptions(base_url=llm_server.url), host=host(), retry=FAST)
    queries = [
        ("phase0/branch0", _request("optimize A", seed=1)),
        ("phase1/branch0", _request("improve P")),  # one prompt asked for three children
        ("phase1/branch1", _request("improve P")),
        ("phase1/branch2", _request("improve P")),
        ("phase0/branch0/fix1", _request("fix B", role="fix")),
    ]
    answers = record(client, tmp_path / "run", queries)
    assert len(set(answers)) == 5 and llm_server.count() == 5
    return tmp_path / "run", queries, answers


def test_replay_answers_every_recorded_request(recorded, llm_server: FakeLLMServer):
    run_dir, queries, answers = recorded
    client = LLMClient(f"offline:replay={run_dir}", host=host(), retry=FAST)
    for (key, request), answer in zip(queries, answers, strict=True):
        request.key = f"{TASK}#{key}"
        response = client.complete(request)
        assert response.text == answer and response.replayed
    assert llm_server.count() == 5  # nothing was sent
    fixed = client.complete(_request("fix B", role="fix"))
    assert (fixed.provider, fixed.model) == ("anthropic", "claude-haiku-4-5")  # as recorded
    assert fixed.cost_usd == pytest.approx((100 * 1.0 + 50 * 5.0) / 1e6)  # the recorded cost


def test_identical_prompts_without_keys_replay_in_journal_order(recorded):
    run_dir, _, answers = recorded
    client = LLMClient("offline:replay", options=BackendOptions(extra={"replay_dir": str(run_dir)}),
                       host=host(), retry=FAST)
    assert [client.complete(_request("improve P")).text for _ in range(3)] == answers[1:4]


def test_an_unrecorded_request_is_a_clear_error(recorded):
    run_dir, _, _ = recorded
    client = LLMClient(f"offline:replay={run_dir / 'journal.jsonl'}", host=host(), retry=FAST)
    with pytest.raises(LLMError, match=r"no recorded answer .* differ from the recorded run"):
        client.complete(_request("optimize A", seed=2))  # another seed: not the recorded request
    with pytest.raises(LLMError):
        client.complete(_request("something new"))


def test_a_torn_last_line_is_ignored(recorded):
    run_dir, _, answers = recorded
    with (run_dir / "journal.jsonl").open("a") as journal:
        journal.write('{"type": "llm", "request_sha256": "abc", "respo')
    client = LLMClient(f"offline:replay={run_dir}", host=host(), retry=FAST)
    assert client.complete(_request("optimize A", seed=1)).text == answers[0]


def test_replaying_a_replayed_run(recorded, tmp_path: Path):
    run_dir, queries, answers = recorded
    first = LLMClient(f"offline:replay={run_dir}", host=host(), retry=FAST)
    again = record(first, tmp_path / "replayed", [(k, r) for k, r in queries[:1]])
    second = LLMClient(f"offline:replay={tmp_path / 'replayed'}", host=host(), retry=FAST)
    assert second.complete(queries[0][1]).text == again[0] == answers[0]


def test_where_the_recording_is_must_be_clear(tmp_path: Path, recorded):
    run_dir, _, _ = recorded
    with pytest.raises(UserError, match="needs a recorded run"):
        LLMClient("offline:replay", host=host())
    with pytest.raises(UserError, match="does not exist"):
        LLMClient(f"offline:replay={tmp_path / 'nowhere'}", host=host())
    with pytest.raises(UserError, match="two recordings"):
        LLMClient(f"offline:replay={run_dir}", options=BackendOptions(extra={"replay_dir": str(tmp_path)}),
                  host=host())
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "journal.jsonl").write_text('{"type": "run_start"}\n')
    with pytest.raises(UserError, match="no recorded LLM responses"):
        LLMClient(f"offline:replay={tmp_path / 'empty'}", host=host())
    with pytest.raises(UserError, match="unknown offline backend"):
        LLMClient("offline:guess", host=host())
