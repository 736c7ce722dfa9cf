"""The price table: shipped prices, lookups, tiers, user overrides, and unknown models."""

from __future__ import annotations

from pathlib import Path

import pytest

from pike_harness.contracts.llm import Usage
from pike_harness.errors import UserError
from pike_harness.host.pricing import PriceTable, lookup_keys

NO_USER = {"HOME": "/nonexistent-home", "XDG_CONFIG_HOME": "/nonexistent-config"}


def test_shipped_prices_cost_the_paper_model():
    table = PriceTable.load(env=NO_USER)
    price = table.price("google", "gemini-2.5-pro")
    assert price is not None and (price.rates.input, price.rates.output) == (1.25, 10.0)
    # PIKE's accounting: $1.25 per million prompt tokens, $10 per million output tokens.
    assert price.cost(Usage(prompt_tokens=20_000, output_tokens=8_000)) == pytest.approx(0.025 + 0.08)
    flash = table.price("google", "gemini-2.5-flash")
    assert (flash.rates.input, flash.rates.output) == (0.30, 2.50)


def test_long_prompts_move_the_whole_request_to_the_higher_tier():
    price = PriceTable.load(env=NO_USER).price("google", "gemini-2.5-pro")
    assert price.cost(Usage(prompt_tokens=200_000, output_tokens=0)) == pytest.approx(0.25)
    assert price.cost(Usage(prompt_tokens=200_001, output_tokens=1_000)) == pytest.approx(
        (200_001 * 2.50 + 1_000 * 15.0) / 1e6)


def test_cached_tokens_use_the_cached_price_or_the_full_price_when_absent():
    table = PriceTable.load(env=NO_USER)
    usage = Usage(prompt_tokens=1_000, output_tokens=0, cached_tokens=800)
    assert table.cost("openai", "gpt-5", usage) == pytest.approx((200 * 1.25 + 800 * 0.125) / 1e6)
    assert table.cost("google", "gemini-2.5-pro", usage) == pytest.approx(1_000 * 1.25 / 1e6)


def test_lookup_order_and_normalised_names():
    table = PriceTable.load(env=NO_USER)
    assert lookup_keys("openrouter", "openai/gpt-5-2025-08-07") == [
        "openrouter:openai/gpt-5-2025-08-07", "openai/gpt-5-2025-08-07", "gpt-5-2025-08-07", "gpt-5"]
    assert table.price("openrouter", "openai/gpt-5").key == "gpt-5"
    assert table.price("anthropic", "claude-sonnet-4-5-20250929").key == "claude-sonnet-4-5"
    assert table.price("anthropic", "claude-sonnet-4-20250514").key == "claude-sonnet-4-0"  # alias
    assert table.price("local", "gpt-5") is None  # self-hosted: no list price
    assert table.price("openai", "gpt-oss-120b") is None
    assert table.cost("openai", "no-such-model", Usage(1, 1)) is None  # unknown, never zero


def test_user_overrides_win_entry_by_entry(tmp_path: Path):
    config = tmp_path / "config" / "pikeh"
    config.mkdir(parents=True)
    (config / "prices.toml").write_text('[models."gpt-5"]\ninput = 1.0\noutput = 2.0\n')
    env_file = tmp_path / "run-prices.toml"
    env_file.write_text('[models."local:qwen"]\ninput = 0\noutput = 0\n\n'
                        '[models."gemini-2.5-pro"]\ninput = 9\noutput = 9\n')
    table = PriceTable.load(env={"XDG_CONFIG_HOME": str(tmp_path / "config"), "PIKEH_PRICES": str(env_file)})
    assert table.price("openai", "gpt-5").rates.input == 1.0
    assert table.price("openai", "gpt-5").rates.cached_input is None  # the whole entry was replaced
    assert table.cost("local", "qwen", Usage(10**6, 10**6)) == 0.0  # known free, not unknown
    assert table.price("google", "gemini-2.5-pro").rates.input == 9
    assert table.price("openai", "gpt-4o").rates.input == 2.50  # untouched entries stay
    assert table.sources[-2:] == [str(config / "prices.toml"), str(env_file)]


@pytest.mark.parametrize("text,message", [
    ("not toml [", "not valid TOML"),
    ('[models."m"]\noutput = 1\n', "`input`"),
    ('[models."m"]\ninput = -1\noutput = 1\n', "non-negative"),
    ('[models."m"]\ninput = 1\noutput = 1\nlong_context = { input = 2, output = 2 }\n', "above"),
])
def test_bad_price_files_are_clear_errors(tmp_path: Path, text: str, message: str):
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        PriceTable.load(env={**NO_USER, "PIKEH_PRICES": str(path)})


def test_a_missing_override_file_is_an_error():
    with pytest.raises(UserError, match="does not exist"):
        PriceTable.load(env={**NO_USER, "PIKEH_PRICES": "/nonexistent/prices.toml"})
