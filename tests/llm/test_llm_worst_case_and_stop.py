"""What a money budget reserves before a query is sent (its worst case), and how a run's stop request
ends the client's retries: no try is sent once the run stops, and a back-off wait is cut short. The
loopback fake counts what was sent."""

from __future__ import annotations

import threading

import pytest
from llm_test_helpers import ask, client_for

from pike_harness.contracts.llm import GenerationParams, LLMError, LLMRequest, Usage
from pike_harness.host.llm_client import LLMRetryPolicy
from pike_harness.host.pricing import PriceTable, prompt_token_bound
from pike_harness.host.run_signals import RunInterrupted
from pike_harness.testing.llm_server import FakeReply

PRICES = """
[models."openai:fake-coder"]
input = 1000.0
output = 2000.0
max_output_tokens = 8000

[models."openai:tiered"]
input = 1.0
output = 10.0
long_context = { above = 1000, input = 2.0, output = 20.0 }
"""


def table() -> PriceTable:
    prices = PriceTable()
    prices.merge_text(PRICES, source="test")
    return prices


def test_the_prompt_bound_is_above_what_the_service_counts():
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "x = 1\n" * 500},
                {"role": "user", "content": "漢字" * 100}]
    bound = prompt_token_bound(messages)
    # The fake (and real tokenizers on prose and code) count about 4 characters a token; CJK about 1.
    assert bound >= sum(len(m["content"]) for m in messages) // 2
    assert bound == (14 + 1) // 2 + 3000 // 2 + 600 // 2 + 3 * 16


def test_the_worst_case_is_the_prompt_bound_at_the_input_price_plus_max_tokens_of_output():
    price = table().price("openai", "fake-coder")
    assert price.worst_case_cost(1_000, 500) == pytest.approx((1_000 * 1000.0 + 500 * 2000.0) / 1e6)
    assert price.worst_case_cost(1_000, 500) >= price.cost(Usage(prompt_tokens=1_000, output_tokens=500))
    tiered = table().price("openai", "tiered")
    assert tiered.worst_case_cost(2_000, 100) == pytest.approx((2_000 * 2.0 + 100 * 20.0) / 1e6)  # the long tier
    assert tiered.worst_case_cost(900, 100) == pytest.approx((900 * 1.0 + 100 * 10.0) / 1e6)


def test_the_client_prices_a_request_as_it_would_be_sent(llm_server, keys):
    client = client_for(llm_server, "openai:fake-coder", prices=table())
    messages = [{"role": "user", "content": "optimize this " * 100}]
    request = LLMRequest(messages=messages, role="optimize", params=GenerationParams(max_tokens=32_000))
    # max_tokens is lowered to the model's output limit (8,000) before it is sent, and priced so.
    expected = (prompt_token_bound(messages) * 1000.0 + 8_000 * 2000.0) / 1e6
    assert client.worst_case_cost(request) == pytest.approx(expected)
    llm_server.script(FakeReply(text="ok " * 50))
    answer = client.complete(request)
    assert answer.cost_usd is not None and answer.cost_usd <= expected
    unpriced = client_for(llm_server, "openai:gpt-unknown-model", prices=PriceTable())
    assert unpriced.worst_case_cost(request) is None
    assert llm_server.count() == 1


def test_a_stop_request_ends_the_retries_without_an_error(llm_server, keys):
    llm_server.set_reply(lambda request: FakeReply(status=503, error_message="overloaded",
                                                   headers={"Retry-After": "0"}))
    waits: list[float] = []
    client = client_for(llm_server, "openai:gpt-5", sleep=waits.append)
    client.stop_when(lambda: llm_server.count() >= 2)  # the run is asked to stop after the second try
    with pytest.raises(RunInterrupted):
        ask(client)
    assert llm_server.count() == 2  # without the stop: 1 + 3 retries, then an LLMError
    plain = client_for(llm_server, "openai:gpt-5", sleep=waits.append)
    with pytest.raises(LLMError, match="gave up after 4 tries"):
        ask(plain)
    assert llm_server.count() == 2 + 4


def test_a_stop_request_cuts_a_back_off_wait_short(llm_server, keys):
    llm_server.set_reply(lambda request: FakeReply(status=429, headers={"Retry-After": "300"}))
    slices: list[float] = []
    client = client_for(llm_server, "openai:gpt-5", sleep=slices.append,
                        retry=LLMRetryPolicy(max_retries=5, max_retry_after_s=300.0))
    client.stop_when(lambda: len(slices) >= 3)  # asked to stop during the 300 s wait
    with pytest.raises(RunInterrupted):
        ask(client)
    assert llm_server.count() == 1 and len(slices) == 3 and sum(slices) < 1.0


def test_a_query_waiting_for_a_concurrency_slot_is_not_sent_once_the_run_stops(llm_server, keys):
    client = client_for(llm_server, "openai:gpt-5", max_concurrency=1)
    stop = threading.Event()
    client.stop_when(stop.is_set)
    outcome: list[BaseException] = []

    def waiting() -> None:
        try:
            ask(client)
        except BaseException as exc:  # noqa: BLE001 - the test looks at which
            outcome.append(exc)

    with client._slot(None):  # another query holds the only slot
        thread = threading.Thread(target=waiting, daemon=True)
        thread.start()
        stop.set()
        thread.join(60)
    assert not thread.is_alive() and isinstance(outcome[0], RunInterrupted)
    assert llm_server.count() == 0
    client.stop_when(None)
    assert ask(client).text == "ok" and llm_server.count() == 1
