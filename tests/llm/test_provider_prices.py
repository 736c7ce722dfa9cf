"""Prices come from the backends that register providers: the host's price table knows no model or preset."""

from __future__ import annotations

import ast
import types
from pathlib import Path

from pike_harness.api import ProviderPrices, hookimpl
from pike_harness.contracts.llm import Usage
from pike_harness.host.llm_client import LLMClient
from pike_harness.host.plugins import PluginHost
from pike_harness.host.pricing import PriceTable

NO_USER = {"HOME": "/nonexistent-home", "XDG_CONFIG_HOME": "/nonexistent-config"}
PRICING = Path(__file__).resolve().parents[2] / "src" / "pike_harness" / "host" / "pricing.py"


def test_the_host_table_knows_no_model_and_no_provider():
    table = PriceTable.load(env=NO_USER, providers={})
    assert table.entries() == {} and table.sources == []
    assert table.price("openai", "gpt-5") is None
    # No provider name appears in pricing's code: what a provider is, its backend says.
    strings = {n.value for n in ast.walk(ast.parse(PRICING.read_text())) if isinstance(n, ast.Constant)}
    assert not strings & {"local", "openai", "google", "anthropic", "openrouter", "deepseek"}


def test_the_openai_plugin_registers_its_presets_prices():
    prices = PluginHost().provider_prices()
    assert prices["local"].list_prices is False and prices["local"].files == ()
    assert prices["google"].list_prices and prices["google"].files[0].name == "prices.toml"
    assert prices["anthropic"].files and prices["anthropic"].files != prices["openai"].files
    table = PriceTable.load(env=NO_USER, providers=prices)
    assert table.price("google", "gemini-2.5-pro").key == "gemini-2.5-pro"
    assert table.price("local", "gpt-5") is None  # a self-hosted server's models have no list price


def _backend_plugin(provider: str, prices: ProviderPrices):
    @hookimpl
    def register_llm_backends(register):
        register(provider, lambda model, options: None, prices=prices)

    return types.SimpleNamespace(register_llm_backends=register_llm_backends)


def test_a_third_party_backend_brings_its_prices(tmp_path: Path):
    file = tmp_path / "acme.toml"
    file.write_text('[models."acme-coder"]\ninput = 1.0\noutput = 3.0\n\n[models."gpt-5"]\ninput = 7\noutput = 7\n')
    plugin = _backend_plugin("acme", ProviderPrices(files=(file,)))
    host = PluginHost(extra=[("acme-llm", plugin, False)])
    table = PriceTable.load(env=NO_USER, providers=host.provider_prices())
    assert table.cost("acme", "acme-coder", Usage(prompt_tokens=1_000_000, output_tokens=0)) == 1.0
    assert table.price("openai", "gpt-5").rates.input == 7  # a later registration wins entry by entry
    assert str(file) in table.sources
    # A user's file still wins over every plugin's.
    user = tmp_path / "mine.toml"
    user.write_text('[models."acme-coder"]\ninput = 0.5\noutput = 0.5\n')
    table = PriceTable.load(env={**NO_USER, "PIKEH_PRICES": str(user)}, providers=host.provider_prices())
    assert table.price("acme", "acme-coder").rates.input == 0.5


def test_a_third_party_self_hosted_provider_gets_no_list_price():
    plugin = _backend_plugin("myvllm", ProviderPrices(list_prices=False))
    host = PluginHost(extra=[("myvllm", plugin, False)])
    table = PriceTable.load(env=NO_USER, providers=host.provider_prices())
    assert table.price("myvllm", "gpt-5") is None and table.price("openai", "gpt-5") is not None


def test_the_llm_client_prices_with_its_hosts_registrations(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.delenv("PIKEH_PRICES", raising=False)
    file = tmp_path / "acme.toml"
    file.write_text('[models."acme-coder"]\ninput = 1.0\noutput = 3.0\n')
    host = PluginHost(extra=[("acme-llm", _backend_plugin("acme", ProviderPrices(files=(file,))), False)])
    client = LLMClient("offline:mutate", host=host)
    assert client.prices.price("acme", "acme-coder") is not None
