"""The host's LLM client: what every backend needs, done once.

A strategy asks ``client.complete(LLMRequest(...))`` from many threads. The client routes the request
by its role to a backend (``--llm`` for every role, ``--fix-llm`` and friends per role), bounds the
number of requests in flight across the whole run, retries transient failures with exponential
back-off and jitter (a server's Retry-After wins), starts no try once the run asks to stop
(``stop_when``), records every failed try in the response, prices the response from the price table
(and a request's worst case before it is sent, for the money budget), and serves and fills the opt-in
response cache. Backends make one attempt per call and know nothing of this.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pike_harness.contracts.llm import (
    BackendOptions,
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryRecord,
    TransientLLMError,
    parse_model_spec,
    request_hash,
)
from pike_harness.errors import UserError
from pike_harness.host.pricing import PriceTable, prompt_token_bound
from pike_harness.host.run_signals import RunInterrupted

DEFAULT_CONCURRENCY = 10  # PIKE: 10 concurrent LLM requests per run
DEFAULT_RETRIES = 5
STOP_POLL_S = 0.1  # how often a back-off wait, or a wait for a concurrency slot, looks at the stop request
REASONING_EFFORTS = ("minimal", "low", "medium", "high")


@dataclass(frozen=True)
class LLMRetryPolicy:
    """How an LLM query's transient failures are retried (back-off, Retry-After); evaluations have their
    own, unrelated ``EvalRetryPolicy``. Tests shrink the delays; nothing else should need to.

    The wait before retry ``n`` (1-based) is ``min(max_delay_s, base_delay_s * 2**(n-1))`` scaled by a
    random factor in [0.5, 1] ("equal jitter", so many clients hit by one 429 do not return in step),
    unless the server sent Retry-After: then exactly that, capped at ``max_retry_after_s``.
    """

    max_retries: int = DEFAULT_RETRIES
    base_delay_s: float = 2.0
    max_delay_s: float = 60.0
    max_retry_after_s: float = 300.0

    def delay(self, retry_number: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (retry_number - 1))
        return ceiling * (0.5 + 0.5 * rng.random())


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate (U+D800-U+DFFF, which a JSON answer can carry as ``\\ud800``)
    replaced by U+FFFD. Why: the answer becomes a candidate file, a prompt and a request hash, each
    written as UTF-8, which a lone surrogate cannot be: the run would end in a ``UnicodeEncodeError``
    (the answer is journaled as ASCII JSON, so nothing recorded changes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


class LLMClient:
    """Routes, limits, retries, prices and caches LLM requests for one run. Thread-safe.

    ``model`` is the default ``PROVIDER:MODEL``; ``role_models`` maps a role to another spec
    (``{"fix": "openai:gpt-4o-mini"}`` from ``--fix-llm``). Backends come from the plugin host's
    ``llm_backends`` registrations; they are built once, up front, so a missing key or an unknown
    provider fails before the run starts.
    """

    def __init__(
        self,
        model: str,
        *,
        role_models: Mapping[str, str] | None = None,
        options: BackendOptions | None = None,
        host: Any = None,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        retry: LLMRetryPolicy | None = None,
        prices: PriceTable | None = None,
        cache_dir: Path | None = None,
        reasoning_effort: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ):
        if max_concurrency < 1:
            raise UserError("the LLM concurrency limit must be at least 1")
        if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
            raise UserError(f"reasoning effort must be one of {', '.join(REASONING_EFFORTS)}")
        self.default_spec = model
        self.role_specs = dict(role_models or {})
        self.options = options or BackendOptions()
        self.retry = retry or LLMRetryPolicy()
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.reasoning_effort = reasoning_effort
        self._sleep = sleep
        self._semaphore = threading.BoundedSemaphore(max_concurrency)
        self.seed = seed
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.max_concurrency = max_concurrency
        self._stop_request: Callable[[], bool] | None = None
        if host is None:
            from pike_harness.host.plugins import PluginHost

            host = PluginHost()
        self.prices = prices if prices is not None else PriceTable.load(providers=host.provider_prices())
        self._backends: dict[str, LLMBackend] = {}
        for spec in dict.fromkeys([model, *self.role_specs.values()]):
            provider, name = parse_model_spec(spec)
            factory = host.get("llm_backends", provider)
            self._backends[spec] = factory(name, self.options)

    # -- routing -------------------------------------------------------------------------------
    def spec_for(self, role: str) -> str:
        return self.role_specs.get(role, self.default_spec)

    def backend_for(self, role: str) -> LLMBackend:
        return self._backends[self.spec_for(role)]

    def costs_known(self, spec: str) -> bool:
        """Whether every call to ``spec`` will have a cost: the backend knows it, or the table prices it."""
        backend = self._backends.get(spec)
        if backend is not None and backend.costs_known:
            return True
        return self.prices.price(*parse_model_spec(spec)) is not None

    def label(self, role: str | None = None) -> str:
        """How output names the model: ``offline:mutate (not an LLM)`` for offline stand-ins."""
        backend = self.backend_for(role) if role else self._backends[self.default_spec]
        return backend.spec if backend.is_llm else f"{backend.spec} (not an LLM)"

    def describe(self) -> dict[str, Any]:
        """What the run record stores about its models (never keys: backends hold those privately)."""
        return {
            "default": self.default_spec,
            "roles": dict(self.role_specs),
            "is_llm": {spec: backend.is_llm for spec, backend in self._backends.items()},
            "base_url": self.options.base_url,
            "max_concurrency": self.max_concurrency,
            "max_retries": self.retry.max_retries,
            "reasoning_effort": self.reasoning_effort,
            "cache_dir": str(self.cache.root) if self.cache else None,
            "prices": list(self.prices.sources),
        }

    # -- requests ------------------------------------------------------------------------------
    def effective_request(self, request: LLMRequest) -> LLMRequest:
        """The request as it is sent: the run's reasoning effort and the query's seed filled in,
        max_tokens lowered to the model's known output limit (a larger value is a 400 from the API,
        not a longer answer)."""
        backend = self.backend_for(request.role)
        params = request.params
        changes: dict[str, Any] = {}
        if params.reasoning_effort is None and self.reasoning_effort is not None:
            changes["reasoning_effort"] = self.reasoning_effort
        if params.seed is None and self.seed is not None:
            changes["seed"] = query_seed(self.seed, request.key)
        price = self.prices.price(backend.provider, backend.model)
        if price and price.max_output_tokens and params.max_tokens > price.max_output_tokens:
            changes["max_tokens"] = price.max_output_tokens
        if not changes:
            return request
        return dataclasses.replace(request, params=dataclasses.replace(params, **changes))

    def request_hash(self, request: LLMRequest) -> str:
        """The stable sha256 the run journal stores and offline:replay matches on (see llm.request_hash)."""
        backend = self.backend_for(request.role)
        return request_hash(backend.provider, backend.model, self.effective_request(request))

    def worst_case_cost(self, request: LLMRequest) -> float | None:
        """The most ``request`` can cost, in dollars, as it would be sent: a bound on its prompt's tokens
        (``pricing.prompt_token_bound``) at the input price plus its ``max_tokens`` (after
        ``effective_request``) at the output price. None when the table has no price for its model
        (a backend that knows its own costs, or none at all): the money budget then checks spend only."""
        backend = self.backend_for(request.role)
        price = self.prices.price(backend.provider, backend.model)
        if price is None:
            return None
        request = self.effective_request(request)
        return price.worst_case_cost(prompt_token_bound(request.messages), request.params.max_tokens)

    def stop_when(self, requested: Callable[[], bool] | None) -> None:
        """The run's stop request (``RunServices.stopping``), looked at by every ``complete`` from now on
        (a run's tasks register it: the client is the run's). Once it is true no try is started, not
        the first (a query still waiting for a concurrency slot) nor a retry, and a back-off wait is cut
        short: ``RunInterrupted`` is raised, which is no ``LLMError``, so nothing is journaled and a
        resume asks the query again. A try already sent is waited for: its answer is paid for."""
        self._stop_request = requested

    def complete(self, request: LLMRequest, *, stop: Callable[[], bool] | None = None) -> LLMResponse:
        """One answer, after up to ``retry.max_retries`` retries; raises LLMError when none came.

        A truncated or empty reply is an answer (flagged ``truncated``/``empty``), not an error.
        ``stop``: a stop request for this call alone, in place of the one ``stop_when`` registered.
        """
        stop = stop or self._stop_request
        backend = self.backend_for(request.role)
        request = self.effective_request(request)
        digest = request_hash(backend.provider, backend.model, request)
        if self.cache is not None:
            cached = self.cache.get(digest, request.key)
            if cached is not None:
                return cached
        response = self._with_retries(backend, request, stop)
        self._finish(backend, response)
        if self.cache is not None and not response.empty:
            self.cache.put(digest, request.key, response)
        return response

    def _with_retries(self, backend: LLMBackend, request: LLMRequest,
                      stop: Callable[[], bool] | None = None) -> LLMResponse:
        retries: list[RetryRecord] = []
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                with self._slot(stop):
                    if stop is not None and stop():
                        raise RunInterrupted()  # asked to stop: no new try, nothing to journal
                    started = time.monotonic()
                    response = backend.complete(request)
            except TransientLLMError as exc:
                if attempt > self.retry.max_retries:
                    final = LLMError(f"{backend.spec}: gave up after {attempt} tries: {exc}", status=exc.status)
                    final.retries = retries
                    raise final from None
                with self._rng_lock:
                    wait = self.retry.delay(attempt, exc.retry_after, self._rng)
                retries.append(RetryRecord(attempt=attempt, error=str(exc), status=exc.status,
                                           waited_s=round(wait, 3)))
                self._pause(wait, stop)
                continue
            except LLMError as exc:
                exc.retries = retries
                raise
            if not response.latency_s:
                response.latency_s = time.monotonic() - started
            response.retries = retries + list(response.retries)
            return response

    @contextlib.contextmanager
    def _slot(self, stop: Callable[[], bool] | None) -> Iterator[None]:
        """One of the ``max_concurrency`` slots; a wait for it ends when the run is asked to stop."""
        if stop is None:
            self._semaphore.acquire()
        else:
            while not self._semaphore.acquire(timeout=STOP_POLL_S):
                if stop():
                    raise RunInterrupted()
        try:
            yield
        finally:
            self._semaphore.release()

    def _pause(self, seconds: float, stop: Callable[[], bool] | None) -> None:
        """The back-off wait, in slices of ``STOP_POLL_S`` when there is a stop request to look at (the
        next try looks at it again before it is sent)."""
        if stop is None:
            self._sleep(seconds)
            return
        left = seconds
        while left > 0 and not stop():
            step = min(left, STOP_POLL_S)
            self._sleep(step)
            left -= step

    def _finish(self, backend: LLMBackend, response: LLMResponse) -> None:
        """Fill what every response must carry: flags, provider/model, and the cost; and make its text
        valid Unicode (``valid_unicode``)."""
        response.text = valid_unicode(response.text)
        response.provider = response.provider or backend.provider
        response.model = response.model or backend.model
        response.is_llm = response.is_llm and backend.is_llm
        response.empty = response.empty or not response.text.strip()
        if response.cost_usd is None:
            price = self.prices.price(response.provider, response.model)
            if price is None and response.model_id:
                price = self.prices.price(response.provider, response.model_id)
            if price is not None:
                response.cost_usd = price.cost(response.usage)
                response.cost_source = f"prices:{price.key}"

    def close(self) -> None:
        for backend in self._backends.values():
            with contextlib.suppress(Exception):
                backend.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def query_seed(run_seed: int, key: str | None) -> int:
    """The seed one query is sent with: a function of the run's seed and the query's key.

    Derived per query, not the run seed itself, so that a prompt asked several times (PIKE-B sends one
    parent's prompt to 2-3 children) is several samples, not one answer repeated by a provider that
    honours seeds; and a function of the run seed, so another seed asks other questions of the cache,
    of offline:mutate and of the provider.
    """
    if key is None:
        return run_seed
    digest = hashlib.sha256(f"{run_seed}:{key}".encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


class ResponseCache:
    """Opt-in store of answers: one JSON file per request, named by its hash (and query key).

    An identical request (provider, model, messages, parameters including the seed) gets the stored
    answer back, flagged ``from_cache``, so a rerun is reproducible and costs nothing new. The stored
    ``cost_usd`` is kept (what the query costs, not what this rerun paid) so budgets still mean the
    same. When the request names its query (``LLMRequest.key``), the key is part of the file name: a
    search that asks one prompt three times for three different children gets three stored answers,
    not one answer three times.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, digest: str, key: str | None) -> Path:
        name = digest if key is None else hashlib.sha256(f"{digest}\n{key}".encode()).hexdigest()
        return self.root / name[:2] / f"{name}.json"

    def get(self, digest: str, key: str | None) -> LLMResponse | None:
        path = self.path(digest, key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        response = LLMResponse.from_dict(data["response"])
        response.from_cache = True
        response.retries = []
        return response

    def put(self, digest: str, key: str | None, response: LLMResponse) -> None:
        path = self.path(digest, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"request_sha256": digest, "key": key, "response": response.to_dict()}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
        os.replace(tmp, path)
