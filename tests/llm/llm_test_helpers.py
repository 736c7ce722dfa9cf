"""Helpers shared by the LLM tests: a plugin host with only the LLM plugins, clients aimed at the fake."""

from __future__ import annotations

import pikeh_anthropic
import pikeh_offline
import pikeh_openai

from pike_harness.contracts.llm import BackendOptions, GenerationParams, LLMRequest, LLMResponse
from pike_harness.host.llm_client import LLMClient, LLMRetryPolicy
from pike_harness.host.plugins import PluginHost
from pike_harness.testing.llm_server import FakeLLMServer

FAST = LLMRetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05)
MODELS = {"openai": "openai:gpt-5", "anthropic": "anthropic:claude-sonnet-4-5"}


def host() -> PluginHost:
    """Only the LLM plugins, registered the way their entry points would register them."""
    return PluginHost(entry_points=False, extra=[("openai", pikeh_openai, True),
                                                 ("anthropic", pikeh_anthropic, True),
                                                 ("offline", pikeh_offline, True)])


def client_for(server: FakeLLMServer, model: str, **kwargs) -> LLMClient:
    base = server.anthropic_base_url if model.startswith("anthropic:") else server.openai_base_url
    kwargs.setdefault("retry", FAST)
    return LLMClient(model, options=BackendOptions(base_url=base), host=host(), **kwargs)


def ask(client: LLMClient, text: str = "Write a fast kernel.", *, role: str = "optimize", **params) -> LLMResponse:
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}]
    return client.complete(LLMRequest(messages=messages, role=role, params=GenerationParams(**params)))
