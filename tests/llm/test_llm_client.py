"""LLMClient pieces that need no HTTP detail: the request hash, the response cache, the retry schedule."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from llm_test_helpers import FAST, ask, client_for, host

from pike_harness.contracts.llm import (
    GenerationParams,
    LLMRequest,
    LLMResponse,
    Usage,
    parse_model_spec,
    request_hash,
)
from pike_harness.errors import UserError
from pike_harness.host.llm_client import LLMClient, LLMRetryPolicy
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply

MESSAGES = [{"role": "user", "content": "optimize this"}]


def test_request_hash_covers_what_changes_the_answer():
    base = LLMRequest(messages=MESSAGES, role="optimize", params=GenerationParams(seed=1))
    same = [
        dataclasses.replace(base, role="fix"),  # the role only routes
        dataclasses.replace(base, key="smoke/1#phase0/branch0"),  # the key names the query
        dataclasses.replace(base, params=GenerationParams(seed=1, timeout_s=5)),  # when, not what
    ]
    different = [
        dataclasses.replace(base, messages=[{"role": "user", "content": "optimize that"}]),
        dataclasses.replace(base, params=GenerationParams(seed=2)),
        dataclasses.replace(base, params=GenerationParams(seed=1, temperature=0.2)),
        dataclasses.replace(base, params=GenerationParams(seed=1, max_tokens=100)),
    ]
    digest = request_hash("openai", "gpt-5", base)
    assert len(digest) == 64 and digest == request_hash("openai", "gpt-5", base)
    assert all(request_hash("openai", "gpt-5", r) == digest for r in same)
    assert all(request_hash("openai", "gpt-5", r) != digest for r in different)
    assert request_hash("openai", "gpt-5-mini", base) != digest
    assert request_hash("google", "gpt-5", base) != digest


def test_model_specs():
    assert parse_model_spec("openrouter:openai/gpt-oss-120b") == ("openrouter", "openai/gpt-oss-120b")
    assert parse_model_spec("local:llama3:8b") == ("local", "llama3:8b")
    with pytest.raises(UserError, match="PROVIDER:MODEL"):
        parse_model_spec("gpt-5")


def test_unknown_provider_lists_the_choices():
    with pytest.raises(UserError, match=r"unknown .*'nope'.*anthropic.*offline.*openai"):
        LLMClient("nope:model", host=host())


def test_retry_schedule_is_exponential_capped_and_jittered():
    policy = LLMRetryPolicy(base_delay_s=1.0, max_delay_s=8.0, max_retry_after_s=30.0)
    rng = random.Random(0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        waits = [policy.delay(retry, None, rng) for _ in range(200)]
        assert min(waits) >= ceiling / 2 and max(waits) <= ceiling
        assert len(set(waits)) > 100  # jittered
    assert policy.delay(1, 12.5, rng) == 12.5
    assert policy.delay(1, 3600.0, rng) == 30.0  # a server's very long hint is capped


def test_cache_returns_the_stored_reply(llm_server: FakeLLMServer, keys, tmp_path: Path):
    llm_server.set_reply(lambda request: f"answer {len(llm_server.requests)}")
    client = client_for(llm_server, "openai:gpt-5", cache_dir=tmp_path / "cache")
    first = ask(client, seed=7)
    again = ask(client, seed=7)
    assert first.text == again.text == "answer 1" and llm_server.count() == 1
    assert again.from_cache and not first.from_cache
    assert again.cost_usd == first.cost_usd and again.usage == first.usage
    assert ask(client, seed=8).text == "answer 2"  # another seed is another request
    # A fresh client (a rerun) over the same folder is served from it too.
    rerun = client_for(llm_server, "openai:gpt-5", cache_dir=tmp_path / "cache")
    assert ask(rerun, seed=7).text == "answer 1" and llm_server.count() == 2
    stored = list((tmp_path / "cache").rglob("*.json"))
    assert len(stored) == 2 and "sk-test" not in "".join(p.read_text() for p in stored)


def test_cache_keeps_identical_prompts_of_different_queries_apart(llm_server: FakeLLMServer, keys,
                                                                 tmp_path: Path):
    llm_server.set_reply(lambda request: f"child {len(llm_server.requests)}")
    client = client_for(llm_server, "openai:gpt-5", cache_dir=tmp_path)
    texts = [client.complete(LLMRequest(messages=MESSAGES, key=f"phase1/branch{i}")).text for i in range(3)]
    assert texts == ["child 1", "child 2", "child 3"]
    again = [client.complete(LLMRequest(messages=MESSAGES, key=f"phase1/branch{i}")).text for i in range(3)]
    assert again == texts and llm_server.count() == 3


def test_cache_does_not_keep_empty_replies(llm_server: FakeLLMServer, keys, tmp_path: Path):
    llm_server.script(FakeReply(text=""), "second try")
    client = client_for(llm_server, "openai:gpt-5", cache_dir=tmp_path)
    assert ask(client).empty
    assert ask(client).text == "second try"


def test_responses_round_trip_through_json():
    response = LLMResponse(text="x", usage=Usage(10, 5, 2, 1), latency_s=0.5, provider="openai", model="gpt-5",
                           cost_usd=0.001, cost_source="prices:gpt-5", replayed=True)
    data = json.loads(json.dumps(response.to_dict()))
    data["usage"]["some_future_field"] = 1
    data["another_future_field"] = True
    assert LLMResponse.from_dict(data) == response


def test_describe_names_offline_backends_honestly():
    client = LLMClient("offline:mutate", host=host(), retry=FAST)
    assert client.label() == "offline:mutate (not an LLM)"
    assert client.describe()["is_llm"] == {"offline:mutate": False}
    response = client.complete(LLMRequest(messages=MESSAGES))
    assert response.is_llm is False and response.cost_usd == 0.0 and response.cost_source == "free"


def test_the_cache_key_and_offline_mutate_vary_with_the_run_seed(tmp_path: Path):
    messages = [{"role": "user", "content": "x"}]
    request = LLMRequest(messages=messages, key="smoke/1#p000/s00")
    clients = [LLMClient("offline:mutate", host=host(), seed=s, cache_dir=tmp_path / "cache") for s in (0, 0, 1)]
    hashes = [c.request_hash(request) for c in clients]
    assert hashes[0] == hashes[1] != hashes[2]
    assert [c.effective_request(request).params.seed for c in clients][:2] == [
        clients[0].effective_request(request).params.seed] * 2
    unseeded = LLMClient("offline:mutate", host=host())
    assert unseeded.effective_request(request).params.seed is None


@pytest.mark.parametrize("model", ["openai:gpt-5", "anthropic:claude-sonnet-4-5"])
def test_a_lone_surrogate_in_an_answer_becomes_a_replacement_character(llm_server, keys, model):
    """A JSON answer can carry "\\ud800" with no partner; as a str it cannot be written as UTF-8 (the
    candidate file, the next prompt, its request hash), so the client hands out U+FFFD instead."""
    llm_server.script(FakeReply(text="x = '\ud800'  # lone"))
    answer = ask(client_for(llm_server, model))
    assert "\ud800" not in answer.text and "\ufffd" in answer.text and answer.text.endswith("# lone")
    answer.text.encode("utf-8")
    request_hash("openai", "gpt-5", LLMRequest(messages=[{"role": "user", "content": answer.text}], role="optimize"))
