"""Anthropic's Messages API through the official ``anthropic`` SDK (``anthropic:claude-sonnet-4-5``).

The SDK is imported only when a backend is built (see backend.py), so every other ``pikeh`` command
starts without it.
"""

from __future__ import annotations

from pathlib import Path

from pike_harness.api import BackendOptions, LLMBackend, ProviderPrices, RegisterLLMBackend, hookimpl

PRICES = ProviderPrices(files=(Path(__file__).parent / "prices.toml",))


def factory(model: str, options: BackendOptions) -> LLMBackend:
    """anthropic: Anthropic Messages API (https://api.anthropic.com, key ANTHROPIC_API_KEY)"""
    from pikeh_anthropic.backend import AnthropicBackend

    return AnthropicBackend(model, options)


@hookimpl
def register_llm_backends(register: RegisterLLMBackend) -> None:
    register("anthropic", factory, prices=PRICES)
