"""The Anthropic backend: one Messages request per ``complete`` call (SDK retries off; the host retries).

Requests are not streamed: the explicit per-request timeout we pass also lifts the SDK's refusal of
long non-streamed requests, and a PIKE answer is one program, read whole.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pike_harness.api import (
    BackendOptions,
    GenerationParams,
    LLMBackend,
    LLMRequest,
    LLMResponse,
    Usage,
    UserError,
    reject_non_json,
    sdk_errors,
)

KEY_VAR = "ANTHROPIC_API_KEY"
BASE_URL_VAR = "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"
# The Messages API's effort levels; "minimal" (an OpenAI level) maps to the lowest.
EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}


def request_args(params: GenerationParams) -> dict[str, Any]:
    """Generation parameters in Messages API terms.

    The current Messages API (SDK 2.x) has no temperature or top_p: Claude models sample at their own
    setting, so PIKE's temperature is not sent. A reasoning effort is sent as ``output_config.effort``,
    the API's reasoning-effort control; thinking itself is left at the model's default (adaptive on
    the models that have it). Seeds are not supported by the API either.
    """
    args: dict[str, Any] = {"max_tokens": params.max_tokens}
    if params.reasoning_effort is not None:
        args["output_config"] = {"effort": EFFORTS.get(params.reasoning_effort, params.reasoning_effort)}
    return args


def split_system(messages: list[dict[str, str]]) -> tuple[str | None, list[dict[str, str]]]:
    """The Messages API takes system text as a parameter, not as a message."""
    system = [m["content"] for m in messages if m.get("role") == "system"]
    rest = [{"role": m["role"], "content": m["content"]} for m in messages if m.get("role") != "system"]
    return ("\n\n".join(system) if system else None), rest


class AnthropicBackend(LLMBackend):
    provider = "anthropic"

    def __init__(self, model: str, options: BackendOptions):
        super().__init__(model, options)
        self._key = os.environ.get(KEY_VAR, "").strip()
        if not self._key:
            raise UserError(f"anthropic:{model} needs an API key: set {KEY_VAR} in the environment "
                            "(pikeh never reads keys from files or options)")
        self.base_url = options.base_url or os.environ.get(BASE_URL_VAR) or DEFAULT_BASE_URL
        import anthropic

        self._anthropic = anthropic
        self._client = anthropic.Anthropic(api_key=self._key, base_url=self.base_url, max_retries=0,
                                           timeout=options.timeout_s)

    def complete(self, request: LLMRequest) -> LLMResponse:
        anthropic = self._anthropic
        system, messages = split_system(request.messages)
        args = request_args(request.params)
        if system is not None:
            args["system"] = system
        started = time.monotonic()
        with sdk_errors(anthropic, spec=self.spec, base_url=self.base_url, timeout_s=request.params.timeout_s,
                        secrets=[self._key]):
            reply = self._client.messages.create(model=self.model, messages=messages,
                                                 timeout=request.params.timeout_s, **args)
        latency = time.monotonic() - started
        reject_non_json(reply, spec=self.spec, secrets=[self._key])
        text = "".join(block.text for block in (reply.content or []) if getattr(block, "type", "") == "text")
        stop = reply.stop_reason
        return LLMResponse(
            text=text, usage=_usage(reply.usage), latency_s=latency, provider=self.provider,
            model=self.model, model_id=reply.model, finish_reason=stop,
            truncated=stop == "max_tokens", empty=not text.strip(),
        )

    def close(self) -> None:
        self._client.close()


def _usage(raw: Any) -> Usage:
    """Anthropic counts cache reads and writes apart from input_tokens; the host's prompt_tokens is
    the whole prompt (cached tokens included), and output_tokens already includes thinking."""
    if raw is None:
        return Usage()
    cache_read = getattr(raw, "cache_read_input_tokens", None)
    cache_write = getattr(raw, "cache_creation_input_tokens", None) or 0
    prompt = (raw.input_tokens or 0) + (cache_read or 0) + cache_write
    return Usage(prompt_tokens=prompt, output_tokens=raw.output_tokens or 0, cached_tokens=cache_read)
