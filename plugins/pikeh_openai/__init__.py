"""OpenAI and every OpenAI-compatible service, through the official ``openai`` SDK (Chat Completions).

One backend serves all presets; a preset is a provider name with its endpoint and key variable, so
``google:gemini-2.5-pro`` and ``local:qwen2.5-coder`` use the same tested code path as
``openai:gpt-5``. ``--llm-base-url`` overrides any preset's endpoint. The SDK is imported only when a
backend is built (see backend.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.api import BackendOptions, LLMBackend, ProviderPrices, RegisterLLMBackend, hookimpl

# The list prices of the hosted presets' models; a self-hosted server's models have none.
PRICE_FILE = Path(__file__).parent / "prices.toml"


@dataclass(frozen=True)
class Preset:
    """How to reach one OpenAI-compatible service."""

    name: str
    base_url: str
    key_vars: tuple[str, ...]  # the first one set is used
    key_required: bool = True
    self_hosted: bool = False  # models you serve yourself: no list price applies (only "local:model" entries)
    base_url_var: str | None = None  # an environment variable that overrides base_url
    # OpenAI renamed max_tokens to max_completion_tokens (o-series models accept only the new name);
    # most compatible servers still document max_tokens.
    token_param: str = "max_tokens"
    extra_body: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    # Whether the service takes a ``seed`` (documented per preset in docs/llm.md): sent only where it is
    # documented, as an unknown parameter can be a 400.
    seed: bool = False
    # Sampling defaults sent unless the run sets them (not to reasoning models, which reject them);
    # keys other than top_p go in the request body as extra fields (Gemini's top_k).
    sampling: dict[str, Any] = field(default_factory=dict)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("openai", "https://api.openai.com/v1", ("OPENAI_API_KEY",), base_url_var="OPENAI_BASE_URL",
           token_param="max_completion_tokens", note="OpenAI", seed=True),
    # PIKE sent Gemini top_p 1.0 and top_k 50.
    Preset("google", "https://generativelanguage.googleapis.com/v1beta/openai/",
           ("GEMINI_API_KEY", "GOOGLE_API_KEY"), note="Gemini's OpenAI-compatible endpoint",
           sampling={"top_p": 1.0, "top_k": 50}),
    # OpenRouter reports each answer's cost when asked; that beats any table for routed models.
    Preset("openrouter", "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",),
           extra_body={"usage": {"include": True}}, note="OpenRouter (model names like openai/gpt-oss-120b)",
           seed=True),
    Preset("deepseek", "https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",), note="DeepSeek"),
    Preset("together", "https://api.together.xyz/v1", ("TOGETHER_API_KEY",), note="Together AI", seed=True),
    Preset("fireworks", "https://api.fireworks.ai/inference/v1", ("FIREWORKS_API_KEY",), note="Fireworks AI"),
    Preset("local", "http://127.0.0.1:8000/v1", ("PIKEH_LOCAL_API_KEY",), key_required=False, self_hosted=True,
           base_url_var="PIKEH_LOCAL_BASE_URL",
           note="vLLM / SGLang / Ollama / llama.cpp server (--llm-base-url or PIKEH_LOCAL_BASE_URL)", seed=True),
)}


def make_factory(preset: Preset):
    def factory(model: str, options: BackendOptions) -> LLMBackend:
        from pikeh_openai.backend import OpenAICompatBackend

        return OpenAICompatBackend(model, options, preset)

    factory.__doc__ = f"{preset.name}: {preset.note} ({preset.base_url}, key {' or '.join(preset.key_vars)})"
    return factory


@hookimpl
def register_llm_backends(register: RegisterLLMBackend) -> None:
    for preset in PRESETS.values():
        prices = ProviderPrices(list_prices=False) if preset.self_hosted else ProviderPrices(files=(PRICE_FILE,))
        register(preset.name, make_factory(preset), prices=prices)
