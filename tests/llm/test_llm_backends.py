"""The openai and anthropic backends, through the real SDK clients, against the loopback fake server.

Every test goes through ``LLMClient`` (routing, retries, pricing) and the real ``openai``/``anthropic``
SDKs over HTTP on 127.0.0.1: the requests the fake receives are the requests a provider would.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from llm_test_helpers import FAST, MODELS, ask, client_for, host

from pike_harness.contracts.llm import BackendOptions, LLMError, LLMRequest
from pike_harness.errors import UserError
from pike_harness.host.llm_client import LLMClient, LLMRetryPolicy
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply

APIS = ("openai", "anthropic")
REPO = Path(__file__).resolve().parents[2]
# The SDK warns that claude-sonnet-4-5 is deprecated; it is the model whose price we know.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


@pytest.mark.parametrize("api", APIS)
def test_success_usage_and_cost(api: str, llm_server: FakeLLMServer, keys: dict[str, str]):
    llm_server.script(FakeReply(text="```python\nprint(1)\n```", prompt_tokens=1000, output_tokens=200,
                                cached_tokens=400, model_id=f"{api}-model-2025"))
    response = ask(client_for(llm_server, MODELS[api]), max_tokens=1000)
    assert response.text == "```python\nprint(1)\n```"
    assert response.model_id == f"{api}-model-2025" and response.provider == api
    assert response.usage.prompt_tokens == 1000 and response.usage.output_tokens == 200
    assert response.usage.cached_tokens == 400
    assert response.latency_s > 0 and not response.truncated and not response.empty and not response.retries
    if api == "openai":  # gpt-5: $1.25 in, $0.125 cached in, $10 out per million
        expected = (600 * 1.25 + 400 * 0.125 + 200 * 10.0) / 1e6
        assert response.cost_source == "prices:gpt-5"
    else:  # claude-sonnet-4-5: $3 in, $0.30 cache reads, $15 out
        expected = (600 * 3.0 + 400 * 0.30 + 200 * 15.0) / 1e6
        assert response.cost_source == "prices:claude-sonnet-4-5"
    assert response.cost_usd == pytest.approx(expected)
    (seen,) = llm_server.requests
    assert seen.api == api
    assert seen.messages[0] == {"role": "system", "content": "You are terse."}
    assert seen.messages[1]["content"] == "Write a fast kernel."
    assert seen.headers["authorization"] == f"Bearer {keys[api]}"
    if api == "anthropic":
        assert seen.body["system"] == "You are terse." and seen.body["max_tokens"] == 1000
        assert "temperature" not in seen.body  # the Messages API of SDK 2.x has no temperature


@pytest.mark.parametrize("api", APIS)
def test_429_honours_retry_after(api: str, llm_server: FakeLLMServer, keys: dict[str, str]):
    waits: list[float] = []
    llm_server.script(FakeReply(status=429, headers={"Retry-After": "7"}, error_message="slow down"), "done")
    client = client_for(llm_server, MODELS[api], sleep=waits.append)
    response = ask(client)
    assert response.text == "done"
    assert waits == [7.0]  # the server's hint, not the back-off schedule
    (retry,) = response.retries
    assert retry.status == 429 and retry.waited_s == 7.0 and "slow down" in retry.error
    assert llm_server.count(api) == 2


def test_retry_after_ms_is_waited_for_real(llm_server: FakeLLMServer, keys: dict[str, str]):
    llm_server.script(FakeReply(status=429, headers={"retry-after-ms": "150"}), "done")
    started = time.monotonic()
    response = ask(client_for(llm_server, "openai:gpt-5"))
    assert time.monotonic() - started >= 0.15
    assert response.retries[0].waited_s == pytest.approx(0.15)


@pytest.mark.parametrize("api", APIS)
def test_500_then_success_backs_off_with_jitter(api: str, llm_server: FakeLLMServer, keys: dict[str, str]):
    waits: list[float] = []
    llm_server.script(FakeReply(status=500), FakeReply(status=503), "recovered")
    policy = LLMRetryPolicy(max_retries=5, base_delay_s=1.0, max_delay_s=60.0)
    response = ask(client_for(llm_server, MODELS[api], retry=policy, sleep=waits.append, seed=3))
    assert response.text == "recovered"
    assert [r.status for r in response.retries] == [500, 503]
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0  # exponential, jittered in [0.5, 1] x
    assert [r.waited_s for r in response.retries] == [round(w, 3) for w in waits]


@pytest.mark.parametrize("api", APIS)
def test_timeout_is_retried_then_reported(api: str, llm_server: FakeLLMServer, keys: dict[str, str]):
    # The retry must be answered within the same timeout, by a server thread that shares this process and
    # its GIL: 15 s, so no loaded CI runner times the retry out too (its next try would get the server's
    # default reply). The slow reply waits far longer (60 s) and costs nothing: the server cuts it short
    # when it stops.
    llm_server.script(FakeReply(delay_s=60), "in time")
    response = ask(client_for(llm_server, MODELS[api]), timeout_s=15)
    assert response.text == "in time"
    (retry,) = response.retries
    assert retry.status is None and "no answer within 15 s" in retry.error

    # 60 s, not 5: a client starved past the reply's delay would read the reply instead of timing out.
    llm_server.script(*[FakeReply(delay_s=60)] * 3)
    client = client_for(llm_server, MODELS[api], retry=LLMRetryPolicy(max_retries=2, base_delay_s=0.01))
    with pytest.raises(LLMError) as info:
        ask(client, timeout_s=0.2)
    assert "gave up after 3 tries" in str(info.value) and len(info.value.retries) == 2


@pytest.mark.parametrize("api", APIS)
def test_truncated_and_empty_replies_are_recorded_not_raised(api: str, llm_server: FakeLLMServer,
                                                             keys: dict[str, str]):
    llm_server.script(FakeReply(text="```python\nclass ModelNew:", finish="length"), FakeReply(text=""))
    client = client_for(llm_server, MODELS[api])
    cut = ask(client)
    assert cut.truncated and not cut.empty
    assert cut.finish_reason == ("length" if api == "openai" else "max_tokens")
    empty = ask(client)
    assert empty.empty and empty.text == "" and not empty.truncated
    assert llm_server.count() == 2  # neither was retried


@pytest.mark.parametrize("spec,var", [("openai:gpt-5", "OPENAI_API_KEY"), ("anthropic:claude-sonnet-4-5",
                                      "ANTHROPIC_API_KEY"), ("google:gemini-2.5-pro", "GEMINI_API_KEY"),
                                      ("openrouter:openai/gpt-oss-120b", "OPENROUTER_API_KEY"),
                                      ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY")])
def test_missing_key_names_the_variable(spec: str, var: str, monkeypatch: pytest.MonkeyPatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                 "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError) as info:
        LLMClient(spec, host=host())
    assert var in info.value.message and spec in info.value.message


def test_local_servers_need_no_key(llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PIKEH_LOCAL_API_KEY", raising=False)
    llm_server.script("local answer")
    client = LLMClient("local:qwen2.5-coder-7b", options=BackendOptions(base_url=llm_server.openai_base_url),
                       host=host(), retry=FAST)
    response = ask(client)
    assert response.text == "local answer" and response.provider == "local"
    assert response.cost_usd is None and response.cost_source is None  # self-hosted: no list price
    assert llm_server.requests[0].body["max_tokens"] == 32_000  # compatible servers get max_tokens


def test_local_base_url_from_the_environment(llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PIKEH_LOCAL_BASE_URL", llm_server.openai_base_url)
    llm_server.script("via env")
    assert ask(LLMClient("local:m", host=host(), retry=FAST)).text == "via env"


def test_base_url_overrides_a_preset(llm_server: FakeLLMServer, keys: dict[str, str],
                                     monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKEFAKEFAKEFAKEFAKEFAKE")
    llm_server.script(FakeReply(text="gemini says hi", prompt_tokens=100_000, output_tokens=1000))
    response = ask(client_for(llm_server, "google:gemini-2.5-pro"))
    assert response.text == "gemini says hi" and response.provider == "google"
    assert response.cost_usd == pytest.approx(0.125 + 0.01)  # $1.25 / $10 per million tokens
    assert llm_server.requests[0].path == "/v1/chat/completions"
    assert llm_server.requests[0].headers["authorization"] == "Bearer AIzaFAKEFAKEFAKEFAKEFAKEFAKE"


def test_gemini_long_prompts_use_the_higher_tier(llm_server: FakeLLMServer, keys, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKEFAKEFAKEFAKEFAKEFAKE")
    llm_server.script(FakeReply(prompt_tokens=300_000, output_tokens=10_000))
    response = ask(client_for(llm_server, "google:gemini-2.5-pro"))
    assert response.cost_usd == pytest.approx((300_000 * 2.50 + 10_000 * 15.0) / 1e6)


@pytest.mark.parametrize("status", [401, 500])
def test_keys_never_appear_in_errors_or_records(status: int, llm_server: FakeLLMServer, keys: dict[str, str]):
    key = keys["openai"]
    echo = FakeReply(status=status, error_message=f"Incorrect API key provided: {key}. Also sk-te****CRET.")
    llm_server.script(echo, echo)
    client = client_for(llm_server, "openai:gpt-5", retry=LLMRetryPolicy(max_retries=1, base_delay_s=0.01))
    with pytest.raises(LLMError) as info:
        ask(client)
    text = str(info.value) + json.dumps([r.__dict__ for r in info.value.retries])
    assert key not in text and "SECRET" not in text and "****" not in text
    assert "[redacted]" in str(info.value)
    assert key not in json.dumps(client.describe())


def test_a_bad_request_is_not_retried(llm_server: FakeLLMServer, keys: dict[str, str]):
    llm_server.script(FakeReply(status=400, error_message="max_tokens is too large"))
    with pytest.raises(LLMError) as info:
        ask(client_for(llm_server, "openai:gpt-5"))
    assert info.value.status == 400 and "max_tokens is too large" in str(info.value)
    assert llm_server.count() == 1 and info.value.retries == []


@pytest.mark.parametrize("model,fixed", [("o3-mini", True), ("gpt-5", True), ("gpt-5-mini", True),
                                         ("gpt-4o", False), ("gpt-5-chat-latest", False)])
def test_reasoning_models_get_effort_instead_of_temperature(model: str, fixed: bool,
                                                           llm_server: FakeLLMServer, keys: dict[str, str]):
    client = client_for(llm_server, f"openai:{model}")
    ask(client, temperature=0.8, top_p=0.9, reasoning_effort="high" if fixed else None, max_tokens=4000)
    body = llm_server.requests[-1].body
    assert body["max_completion_tokens"] == 4000 and "max_tokens" not in body
    if fixed:
        assert body["reasoning_effort"] == "high" and "temperature" not in body and "top_p" not in body
    else:
        assert body["temperature"] == 0.8 and body["top_p"] == 0.9 and "reasoning_effort" not in body


def test_run_wide_reasoning_effort_and_openrouter_cost(llm_server: FakeLLMServer, keys, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-FAKEFAKEFAKE")
    llm_server.script(FakeReply(text="hi", extra_usage={"cost": 0.00042}))
    client = client_for(llm_server, "openrouter:openai/gpt-oss-120b", reasoning_effort="high")
    response = ask(client, temperature=0.7, max_tokens=2000)
    body = llm_server.requests[0].body
    # gpt-oss accepts both: the effort is sent, the temperature kept; OpenRouter is asked for the cost.
    assert body["reasoning_effort"] == "high" and body["temperature"] == 0.7 and body["max_tokens"] == 2000
    assert body["usage"] == {"include": True} and body["model"] == "openai/gpt-oss-120b"
    assert response.cost_usd == pytest.approx(0.00042) and response.cost_source == "reported"


def test_anthropic_reasoning_effort_is_sent_as_output_effort(llm_server: FakeLLMServer, keys: dict[str, str]):
    ask(client_for(llm_server, "anthropic:claude-sonnet-4-5"), reasoning_effort="medium", max_tokens=20_000)
    body = llm_server.requests[0].body
    assert body["output_config"] == {"effort": "medium"} and body["max_tokens"] == 20_000
    assert "temperature" not in body and "top_p" not in body


def test_hidden_reasoning_tokens_count_as_output(llm_server: FakeLLMServer, keys, monkeypatch):
    """Some compatible services leave thinking out of completion_tokens but count it in total_tokens."""
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKEFAKEFAKEFAKEFAKEFAKE")
    llm_server.script(FakeReply(text="x", body={
        "id": "1", "object": "chat.completion", "created": 0, "model": "gemini-2.5-pro",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 610}}))
    response = ask(client_for(llm_server, "google:gemini-2.5-pro"))
    assert response.usage.output_tokens == 510 and response.usage.reasoning_tokens == 500


def test_unknown_models_cost_unknown_not_zero(llm_server: FakeLLMServer, keys: dict[str, str]):
    response = ask(client_for(llm_server, "openai:my-finetune-xyz"))
    assert response.cost_usd is None and response.cost_source is None


def test_max_tokens_lowered_to_the_models_limit(llm_server: FakeLLMServer, keys: dict[str, str]):
    ask(client_for(llm_server, "openai:gpt-4o-mini"), max_tokens=32_000)
    assert llm_server.requests[0].body["max_completion_tokens"] == 16_384


def test_roles_route_to_their_own_models(llm_server: FakeLLMServer, keys: dict[str, str]):
    """PIKE's cheap EFA: --fix-llm sends the error-fixing agent's queries to another model."""
    client = LLMClient("anthropic:claude-sonnet-4-5", role_models={"fix": "openai:gpt-4o-mini"},
                       options=BackendOptions(base_url=llm_server.url), host=host(), retry=FAST)
    # One --llm-base-url for both: the fake answers /chat/completions and /v1/messages under one root.
    ask(client, role="optimize")
    fixed = ask(client, role="fix")
    assert [r.api for r in llm_server.requests] == ["anthropic", "openai"]
    assert fixed.provider == "openai" and fixed.model == "gpt-4o-mini"
    assert client.label("fix") == "openai:gpt-4o-mini" and client.label() == "anthropic:claude-sonnet-4-5"
    request = LLMRequest(messages=[{"role": "user", "content": "x"}], role="optimize")
    fix_request = LLMRequest(messages=[{"role": "user", "content": "x"}], role="fix")
    assert client.request_hash(request) != client.request_hash(fix_request)  # different models


def test_concurrency_is_limited_per_client(llm_server: FakeLLMServer, keys: dict[str, str]):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def slow(request):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return "ok"

    llm_server.set_reply(slow)
    client = client_for(llm_server, "openai:gpt-5", max_concurrency=2)
    threads = [threading.Thread(target=ask, args=(client,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert llm_server.count() == 6 and state["max"] == 2


def test_fake_server_can_answer_like_mutate(llm_server: FakeLLMServer, keys: dict[str, str]):
    """What whole-run tests use: real programs through a real SDK (the role is read from the prompt)."""
    from pike_harness.host.tasks import load_suite
    from pike_harness.kit import code_fences, idea_lists, prompt_templates
    from pike_harness.testing.llm_server import mutate_reply

    task = load_suite(REPO / "tasks" / "smoke", origin="test").task(4)
    llm_server.set_reply(mutate_reply)
    client = client_for(llm_server, "openai:gpt-5")
    ideas = idea_lists.parse_ideas(client.complete(LLMRequest(prompt_templates.brainstorm_messages(task),
                                                             role="brainstorm")).text)
    assert 3 <= len(ideas) <= 10
    program = code_fences.extract_code(client.complete(LLMRequest(prompt_templates.optimize_messages(task, ideas[0]))).text)
    assert "class ModelNew(nn.Module):" in program and "pikeh-mutate:" in program


@pytest.mark.parametrize("api", APIS)
def test_an_answer_that_is_not_json_is_retried_then_reported(api: str, llm_server: FakeLLMServer, keys):
    llm_server.script(FakeReply(raw=b"<html>bad gateway</html>"), "after the glitch")
    assert ask(client_for(llm_server, MODELS[api])).text == "after the glitch"
    llm_server.script(*[FakeReply(raw=b"<html>bad gateway</html>")] * 2)
    with pytest.raises(LLMError, match="not JSON: <html>bad gateway"):
        ask(client_for(llm_server, MODELS[api], retry=LLMRetryPolicy(max_retries=1, base_delay_s=0.01)))


def test_o3_mini_gets_high_reasoning_effort_unless_the_run_names_one(llm_server: FakeLLMServer, keys):
    """PIKE's "o3-mini-high" runs: o3-mini at effort "high" without being asked; other models get none."""
    ask(client_for(llm_server, "openai:o3-mini"), max_tokens=1000)
    assert llm_server.requests[-1].body["reasoning_effort"] == "high"
    ask(client_for(llm_server, "openai:o3-mini-2025-01-31"), max_tokens=1000)
    assert llm_server.requests[-1].body["reasoning_effort"] == "high"
    ask(client_for(llm_server, "openai:o3-mini"), reasoning_effort="low", max_tokens=1000)
    assert llm_server.requests[-1].body["reasoning_effort"] == "low"
    ask(client_for(llm_server, "openai:gpt-5"), max_tokens=1000)
    assert "reasoning_effort" not in llm_server.requests[-1].body


def test_gemini_gets_pikes_top_p_and_top_k(llm_server: FakeLLMServer, keys, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKEFAKEFAKEFAKEFAKEFAKE")
    ask(client_for(llm_server, "google:gemini-2.5-pro"), temperature=0.8, max_tokens=1000)
    body = llm_server.requests[-1].body
    assert body["top_p"] == 1.0 and body["top_k"] == 50 and body["temperature"] == 0.8
    ask(client_for(llm_server, "google:gemini-2.5-pro"), temperature=0.8, top_p=0.5, max_tokens=1000)
    assert llm_server.requests[-1].body["top_p"] == 0.5  # the run's value wins
    # PIKE-O's sampling (its strategy's): top_p 0.95 and no top_k at all.
    ask(client_for(llm_server, "google:gemini-2.5-pro"), temperature=0.8, top_p=0.95, top_k=0, max_tokens=1000)
    body = llm_server.requests[-1].body
    assert body["top_p"] == 0.95 and "top_k" not in body
    ask(client_for(llm_server, "google:gemini-2.5-pro"), temperature=0.8, top_k=20, max_tokens=1000)
    assert llm_server.requests[-1].body["top_k"] == 20
    ask(client_for(llm_server, "openai:gpt-4o"), temperature=0.8, max_tokens=1000)
    assert "top_k" not in llm_server.requests[-1].body and "top_p" not in llm_server.requests[-1].body


def test_the_run_seed_reaches_requests_per_query_where_the_service_takes_one(llm_server: FakeLLMServer, keys,
                                                                            monkeypatch):
    from pike_harness.host.llm_client import query_seed

    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKEFAKEFAKEFAKEFAKEFAKE")
    messages = [{"role": "user", "content": "Write a fast kernel."}]
    openai = client_for(llm_server, "openai:gpt-4o", seed=5)
    for key in ("t/1#p000/s00", "t/1#p000/s01"):
        openai.complete(LLMRequest(messages=messages, key=key))
    first, second = (r.body["seed"] for r in llm_server.requests[-2:])
    assert first == query_seed(5, "t/1#p000/s00") != second == query_seed(5, "t/1#p000/s01")
    assert query_seed(6, "t/1#p000/s00") != first  # another run seed, other seeds
    client_for(llm_server, "google:gemini-2.5-pro", seed=5).complete(LLMRequest(messages=messages, key="k"))
    assert "seed" not in llm_server.requests[-1].body  # not documented for Gemini's endpoint: not sent
    client_for(llm_server, "anthropic:claude-sonnet-4-5", seed=5).complete(LLMRequest(messages=messages, key="k"))
    assert "seed" not in llm_server.requests[-1].body  # the Messages API has no seed
