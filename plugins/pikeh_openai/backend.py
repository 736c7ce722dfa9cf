"""The OpenAI-compatible backend: one Chat Completions request per ``complete`` call.

Chat Completions, not the Responses API, because every preset (Gemini, OpenRouter, DeepSeek, vLLM,
Ollama, ...) speaks it. The SDK's own retries are off: the host's client retries, so every retry is
counted and recorded in one place.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from pikeh_openai import Preset

_O_SERIES = re.compile(r"^o\d+(?:-|$)")
_GPT_MAJOR = re.compile(r"^gpt-(\d+)")


def fixed_temperature(model: str) -> bool:
    """True for OpenAI reasoning models, whose API rejects temperature and top_p (o1/o3/o4, gpt-5 and
    later, except the non-reasoning ``-chat`` variants)."""
    base = model.rsplit("/", 1)[-1].lower()
    if _O_SERIES.match(base):
        return True
    major = _GPT_MAJOR.match(base)
    return bool(major) and int(major.group(1)) >= 5 and "chat" not in base


# Models that PIKE ran at a reasoning effort the run did not name: "o3-mini-high" is o3-mini at "high".
DEFAULT_EFFORT = {"o3-mini": "high"}


def default_effort(model: str) -> str | None:
    """The reasoning effort a model gets when the run sets none (PIKE's o3-mini runs were "high")."""
    base = model.rsplit("/", 1)[-1].lower()
    return DEFAULT_EFFORT.get(re.sub(r"-\d{4}-\d{2}-\d{2}$", "", base))


def sampling_args(preset: Preset, model: str, params: GenerationParams) -> dict[str, Any]:
    """The generation parameters as this service wants them (``extra_body`` holds non-OpenAI ones).

    Reasoning models get ``reasoning_effort`` instead of temperature (o3-mini "high" unless the run
    says otherwise); other models get temperature, the preset's sampling defaults (Gemini: top_p 1.0,
    top_k 50, as PIKE-B sent; a strategy's own top_p / top_k win: PIKE-O's 0.95 and none) and, when the run asks for it, reasoning_effort too (gpt-oss, Gemini 2.5
    and DeepSeek accept both). The seed goes only to services whose preset says they take one.
    """
    args: dict[str, Any] = {preset.token_param: params.max_tokens}
    extra: dict[str, Any] = {}
    if not fixed_temperature(model):
        if params.temperature is not None:
            args["temperature"] = params.temperature
        sampling = dict(preset.sampling)
        if params.top_p is not None:
            sampling["top_p"] = params.top_p
        if params.top_k == 0:
            sampling.pop("top_k", None)
        elif params.top_k is not None:
            sampling["top_k"] = params.top_k
        for name, value in sampling.items():
            (args if name == "top_p" else extra)[name] = value
    effort = params.reasoning_effort or default_effort(model)
    if effort is not None:
        args["reasoning_effort"] = effort
    if params.seed is not None and preset.seed:
        args["seed"] = params.seed
    if extra:
        args["extra_body"] = extra
    return args


class OpenAICompatBackend(LLMBackend):
    """``PRESET:MODEL`` through ``openai.OpenAI`` pointed at the preset's (or the user's) endpoint."""

    def __init__(self, model: str, options: BackendOptions, preset: Preset):
        super().__init__(model, options)
        self.provider = preset.name
        self.preset = preset
        self._key = _api_key(preset, model)
        self.base_url = (options.base_url
                         or (os.environ.get(preset.base_url_var) if preset.base_url_var else None)
                         or preset.base_url)
        import openai

        self._openai = openai
        self._client = openai.OpenAI(api_key=self._key or "not-needed", base_url=self.base_url,
                                     max_retries=0, timeout=options.timeout_s)

    def complete(self, request: LLMRequest) -> LLMResponse:
        openai = self._openai
        args = sampling_args(self.preset, self.model, request.params)
        extra_body = {**self.preset.extra_body, **args.pop("extra_body", {})} or None
        started = time.monotonic()
        with sdk_errors(openai, spec=self.spec, base_url=self.base_url, timeout_s=request.params.timeout_s,
                        secrets=[self._key]):
            reply = self._client.chat.completions.create(
                model=self.model, messages=request.messages, timeout=request.params.timeout_s,
                extra_body=extra_body, **args)
        latency = time.monotonic() - started
        reject_non_json(reply, spec=self.spec, secrets=[self._key])
        choice = reply.choices[0] if reply.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        finish = choice.finish_reason if choice else None
        usage, reported_cost = _usage(reply.usage)
        response = LLMResponse(
            text=text, usage=usage, latency_s=latency, provider=self.provider, model=self.model,
            model_id=getattr(reply, "model", None), finish_reason=finish,
            truncated=finish == "length", empty=not text.strip(),
        )
        if reported_cost is not None:
            response.cost_usd, response.cost_source = reported_cost, "reported"
        return response

    def close(self) -> None:
        self._client.close()


def _api_key(preset: Preset, model: str) -> str | None:
    for var in preset.key_vars:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    if preset.key_required:
        names = " or ".join(preset.key_vars)
        raise UserError(f"{preset.name}:{model} needs an API key: set {names} in the environment "
                        f"(pikeh never reads keys from files or options)")
    return None


def _usage(raw: Any) -> tuple[Usage, float | None]:
    """Normalise to the host's convention: prompt includes cached tokens, output includes reasoning.

    Some compatible services leave reasoning tokens out of completion_tokens but count them in
    total_tokens; the difference is then added to the output (it is billed as output).
    """
    if raw is None:
        return Usage(), None
    prompt = raw.prompt_tokens or 0
    output = raw.completion_tokens or 0
    details_in = getattr(raw, "prompt_tokens_details", None)
    details_out = getattr(raw, "completion_tokens_details", None)
    cached = getattr(details_in, "cached_tokens", None) if details_in else None
    reasoning = getattr(details_out, "reasoning_tokens", None) if details_out else None
    total = getattr(raw, "total_tokens", None) or 0
    hidden = total - prompt - output
    if hidden > 0:
        output += hidden
        reasoning = (reasoning or 0) + hidden
    cost = getattr(raw, "cost", None)
    reported = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    return Usage(prompt_tokens=prompt, output_tokens=output, reasoning_tokens=reasoning,
                 cached_tokens=cached), reported
