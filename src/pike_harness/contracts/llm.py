"""The LLM backend plugin interface: requests that carry the asking agent's role, responses that carry cost.

A backend makes exactly one attempt per ``complete`` call and classifies failures as transient or
permanent; the host's ``LLMClient`` (pike_harness.host.llm_client) adds what every backend needs the same
way: role routing, a concurrency limit, retries with back-off, costing from the price table, and the
opt-in response cache. Keys are read by backends from the environment and never stored anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.errors import PikehError, UserError
from pike_harness.worker import text_safety

# The roles PIKE's agents play; strategies may add their own.
BRAINSTORM = "brainstorm"
OPTIMIZE = "optimize"
FIX = "fix"


@dataclass
class GenerationParams:
    """Sampling parameters; a reasoning model gets ``reasoning_effort`` instead of temperature."""

    temperature: float | None = 0.8
    max_tokens: int = 32_000
    reasoning_effort: str | None = None  # "low" | "medium" | "high" where the API has it
    top_p: float | None = None
    top_k: int | None = None  # None: the provider preset's; 0: none sent
    seed: int | None = None
    timeout_s: float = 600.0


@dataclass
class LLMRequest:
    """One question to a model. ``messages`` are ``{"role": "system"|"user"|"assistant", "content": str}``."""

    messages: list[dict[str, str]]
    role: str = OPTIMIZE  # the agent that asks: brainstorm, optimize, fix or a strategy's own
    params: GenerationParams = field(default_factory=GenerationParams)
    # A stable name for this query within the run ("level3-pike/9#phase3/branch2/fix1"), set by the run
    # loop. Not part of the request hash: it lets the opt-in cache and offline:replay tell apart
    # identical prompts asked several times (PIKE-B sends the same prompt to one parent 2-3 times).
    key: str | None = None


@dataclass
class Usage:
    prompt_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None  # where the API reports it (included in output_tokens)
    cached_tokens: int | None = None  # prompt tokens served from the provider's cache


@dataclass
class RetryRecord:
    """One failed try before the final answer: what went wrong and how long the client waited."""

    attempt: int
    error: str
    status: int | None
    waited_s: float


@dataclass
class LLMResponse:
    text: str
    usage: Usage
    latency_s: float
    provider: str
    model: str  # what was asked for
    model_id: str | None = None  # what the service says answered
    cost_usd: float | None = None  # None when the model's price is unknown: never guessed as zero
    finish_reason: str | None = None
    truncated: bool = False  # stopped at max_tokens
    empty: bool = False
    retries: list[RetryRecord] = field(default_factory=list)
    from_cache: bool = False
    is_llm: bool = True  # False for offline stand-ins, so output never calls them a model
    # Where cost_usd came from: "prices:<entry>" (price table), "reported" (the service said),
    # "free" (offline backends), None while unknown.
    cost_source: str | None = None
    replayed: bool = False  # answered by offline:replay from a recorded run (provider/model as recorded)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMResponse:
        data = dict(data)
        data["usage"] = _known(Usage, data.get("usage") or {})
        data["retries"] = [_known(RetryRecord, r) for r in data.get("retries") or []]
        return _known(cls, data)


def _known(cls: Any, data: dict[str, Any]) -> Any:
    """Build ``cls`` from the keys it knows, so records written by a newer version still load."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


class LLMError(PikehError):
    """A request failed for good (bad request, auth, content refused, or retries exhausted).

    ``retries`` lists the failed tries before this one (filled by the host's client) so the run
    journal can record them even when no answer came.
    """

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(text_safety.printable(message))  # it may quote the endpoint's error body
        self.status = status
        self.retries: list[RetryRecord] = []


class PromptRefusedError(LLMError):
    """The provider refused this one prompt (longer than the model's context window, or content it will
    not process: an HTTP 400 or 413 about the request's content, ``kit/prompt_refusals.py``).

    Apart from ``LLMError`` because it is neither the run's setup failing (every later query would fail
    too: the run stops) nor worth asking again (the same prompt gets the same refusal): the query fails,
    is journaled as refused, costs nothing (providers bill no tokens for a request they refuse), and the
    strategy goes on with its next prompt, which is a different request.
    """


class TransientLLMError(LLMError):
    """Worth retrying (429, 5xx, timeout, connection reset); ``retry_after`` honours the server's hint."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message, status=status)
        self.retry_after = retry_after


@dataclass
class BackendOptions:
    """What the host passes a backend factory besides the model name."""

    base_url: str | None = None  # --llm-base-url: proxies, gateways, local servers
    timeout_s: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderPrices:
    """What a backend plugin tells the price table about its provider, when it registers it.

    ``files``: price files (the TOML format of docs/llm.md) the plugin ships for the models its provider
    serves; they are merged before the user's files, so a user's entry always wins. ``list_prices``:
    False for a provider that serves models you host yourself (a vLLM or Ollama server): a bare model
    name's list price does not apply, only ``provider:model`` entries do. The host's price table knows no
    model and no provider of its own: everything it prices comes from these registrations and the user.
    """

    files: tuple[Path, ...] = ()
    list_prices: bool = True


class LLMBackend(ABC):
    """One provider + model. ``complete`` is called from many threads at once."""

    provider: str = ""
    is_llm: bool = True
    # True when every call's cost is known without the price table (a free offline backend, or a
    # service that always reports it): --money-budget then needs no prices for this backend.
    costs_known: bool = False

    def __init__(self, model: str, options: BackendOptions):
        self.model = model
        self.options = options

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    @abstractmethod
    def complete(self, request: LLMRequest) -> LLMResponse:
        """One attempt. Raise TransientLLMError for retryable failures, LLMError for the rest.

        Leave ``cost_usd`` as None so the client prices the response from the shared price table,
        unless the service itself reports the cost (set ``cost_source="reported"``) or the backend is
        free (``cost_source="free"``). Honour ``request.params.timeout_s`` as the per-request timeout.
        """

    def close(self) -> None:
        """Release connections."""


# What ``register_llm_backends`` registers per provider: ``factory(model, options) -> LLMBackend``.
BackendFactory = Callable[[str, BackendOptions], LLMBackend]


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``"openai:gpt-5"`` -> ``("openai", "gpt-5")``; the model part may contain ``/`` and ``:``."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise UserError(f"bad model {spec!r}: write PROVIDER:MODEL, e.g. openai:gpt-5 or offline:mutate")
    return provider, model


def request_hash(provider: str, model: str, request: LLMRequest) -> str:
    """A stable sha256 of what determines a model's answer: provider, model, messages and parameters.

    The run journal stores it, the response cache is keyed by it and offline:replay matches on it.
    Left out: the role (it only picks the model; the model sees the messages), the query ``key``, the
    timeout (it changes whether an answer comes, not which), and parameters that are None, so adding
    an optional parameter later does not change the hashes of recorded runs.
    """
    params = {k: v for k, v in dataclasses.asdict(request.params).items() if v is not None and k != "timeout_s"}
    payload = {"v": 1, "provider": provider, "model": model, "messages": request.messages, "params": params}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
