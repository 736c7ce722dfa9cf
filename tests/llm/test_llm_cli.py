"""``pikeh llm test|providers|prices`` through the real CLI (in-process, and once as a subprocess)."""

from __future__ import annotations

import json

import pytest

from pike_harness.testing.llm_server import FakeLLMServer, FakeReply


def test_llm_test_offline_mutate_says_it_is_not_an_llm(cli):
    result = cli("llm", "test", "offline:mutate")
    assert result.exit_code == 0, result.output
    assert "model:    offline:mutate (not an LLM)" in result.output
    assert "cost:     $0.000000 (free)" in result.output
    assert "no reference program" in result.output


def test_llm_test_mutate_on_a_task_prints_a_program(cli):
    result = cli("llm", "test", "offline:mutate", "--task", "smoke/4")
    assert result.exit_code == 0, result.output
    assert "class ModelNew(nn.Module):" in result.output and "pikeh-mutate: transforms=" in result.output


def test_llm_test_against_a_base_url(cli, llm_server: FakeLLMServer, keys: dict[str, str]):
    llm_server.script(FakeReply(text="I am a fake GPT.", prompt_tokens=20, output_tokens=6, cached_tokens=0,
                                reasoning_tokens=2, model_id="gpt-5-2025-08-07"))
    result = cli("llm", "test", "openai:gpt-5", "--llm-base-url", llm_server.openai_base_url)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "model:    openai:gpt-5 -> gpt-5-2025-08-07" in out
    assert "tokens:   prompt 20 (cached 0), output 6 (reasoning 2)" in out
    assert f"cost:     ${(20 * 1.25 + 6 * 10.0) / 1e6:.6f} (prices:gpt-5)" in out
    assert "latency:" in out and "I am a fake GPT." in out
    assert keys["openai"] not in out
    (request,) = llm_server.requests
    assert request.body["max_completion_tokens"] == 512 and request.messages[0]["role"] == "user"


def test_llm_test_json_and_retries(cli, llm_server: FakeLLMServer, keys: dict[str, str]):
    llm_server.script(FakeReply(status=429, headers={"retry-after-ms": "10"}), "fine")
    result = cli("llm", "test", "openai:gpt-4o", "--llm-base-url", llm_server.openai_base_url, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["text"] == "fine" and record["retries"][0]["status"] == 429
    assert record["label"] == "openai:gpt-4o" and record["model"] == "gpt-4o" and record["cost_usd"] > 0


def test_llm_test_unknown_price_is_reported_as_unknown(cli, llm_server: FakeLLMServer, keys):
    result = cli("llm", "test", "openai:my-own-model", "--llm-base-url", llm_server.openai_base_url)
    assert result.exit_code == 0, result.output
    assert "cost:     unknown: no price for openai:my-own-model" in result.output


def test_llm_test_missing_key_is_one_clear_line(cli, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = cli("llm", "test", "openai:gpt-5")
    assert result.exit_code == 1
    assert "OPENAI_API_KEY" in result.output and "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # a clean click exit, not a crash


def test_llm_test_server_error_is_one_clear_line(cli, llm_server: FakeLLMServer, keys: dict[str, str]):
    llm_server.script(FakeReply(status=404, error_message="model not found"))
    result = cli("llm", "test", "openai:gpt-9", "--llm-base-url", llm_server.openai_base_url)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "HTTP 404: model not found" in result.output


def test_llm_providers_and_prices(cli):
    providers = cli("llm", "providers", "--json")
    assert providers.exit_code == 0, providers.output
    names = {row["provider"] for row in json.loads(providers.output)}
    assert {"openai", "anthropic", "google", "openrouter", "deepseek", "together", "fireworks", "local",
            "offline"} <= names
    prices = cli("llm", "prices", "google:gemini-2.5-pro")
    assert prices.exit_code == 0 and "in 1.25" in prices.output and "out 10" in prices.output
    unknown = cli("llm", "prices", "openai:unknown-model")
    assert unknown.exit_code == 1 and "unknown" in unknown.output


def test_llm_test_as_users_run_it(run_pikeh, llm_server: FakeLLMServer):
    """The installed console script, as a subprocess, against the fake server."""
    llm_server.script("subprocess hello")
    proc = run_pikeh("llm", "test", "openai:gpt-5", "--llm-base-url", llm_server.openai_base_url,
                     env={"OPENAI_API_KEY": "sk-subprocess-test-key", "XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    assert "subprocess hello" in proc.stdout and "sk-subprocess-test-key" not in proc.stdout + proc.stderr
