"""The evaluator plugin interface: submit candidates, get results as they finish.

An evaluator turns an ``EvalRequest`` into an ``EvalResult`` somewhere safe (a sandboxed process on
this host, a container, a shared-directory worker, a Ray cluster). The host and strategies only ever
see this interface, so any evaluator can serve any run. Results come back as futures so a strategy
can keep many candidates in flight and an evaluator can schedule them as its hardware allows.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pike_harness.contracts.model import EvalRequest, EvalResult
from pike_harness.errors import PikehError
from pike_harness.worker import redaction
from pike_harness.worker.supervise.retry import DEFAULT as DEFAULT_RETRY
from pike_harness.worker.supervise.retry import (
    EvalRetryPolicy as EvalRetryPolicy,  # re-exported: the evaluator interface
)
from pike_harness.worker.supervise.retry import attempts_of as attempts_of

ConfigT = TypeVar("ConfigT")


class EvaluatorError(PikehError):
    """The evaluator itself failed (no GPU, a worker vanished): never a verdict on the candidate.

    ``attempts``: how many tries of the request the evaluator spent before giving up (a transport
    that retries on its own says so), so the run loop retries only what the one ``EvalRetryPolicy``
    (``pike_harness.worker.supervise.retry``) leaves.
    """

    def __init__(self, *args: object, attempts: int = 1):
        # Its words may quote a worker's log or a remote worker's message: shown, never obeyed (no
        # terminal control sequence), and no secret of this process in them (as in a result).
        found = redaction.secret_values()
        super().__init__(*(redaction.shown(a, found) if isinstance(a, str) else a for a in args))
        self.attempts = attempts


@dataclass
class EvaluatorOptions:
    """What the host tells an evaluator when it builds one."""

    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:N" or "cuda:0,1"
    protocol: str = "robust"
    protocol_params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None  # per-stage wall-clock limit; None keeps the request's
    workdir: Path | None = None  # scratch and cache root; None: a temporary folder
    # The evaluator's own options, as an instance of its spec's Config dataclass (None: the Config's
    # defaults). The only way a plugin's options travel: typed, never an untyped dict by name.
    config: Any = None


@dataclass
class EvaluatorSpec:
    """How a plugin registers an evaluator: a name, a factory and its ``Config``.

    ``config`` is a dataclass whose fields are the evaluator's own options, as a strategy's ``Config``
    is: each field becomes a CLI option (``ray_address`` -> ``--ray-address``) that commands attach
    only when this evaluator is chosen (``pikeh eval --evaluator ray --help`` lists Ray's). Put the
    help text in ``field(metadata={"help": ...})``; ``"choices"``, ``"min"`` and ``"metavar"`` refine
    the option. Fields must be bool, int, float or str (or those | None; None means "default").
    The parsed values reach the factory as ``options.config``, an instance of that dataclass
    (``make_config`` builds it from values by name, as the CLI and a resumed run hold them).
    """

    name: str
    factory: Callable[[EvaluatorOptions], Evaluator]
    description: str = ""
    config: type | None = None

    def option_names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.config)] if self.config is not None else []

    def make_config(self, values: Mapping[str, Any]) -> Any:
        """The evaluator's Config from option values by name (as parsed, or as a run's run.json
        recorded them): None keeps the field's default, names the Config lacks are ignored. None when
        the evaluator declares no Config. A value the Config refuses is a one-line ``UserError``."""
        from pike_harness.errors import UserError

        if self.config is None:
            return None
        names = {f.name for f in dataclasses.fields(self.config)}
        try:
            return self.config(**{k: v for k, v in values.items() if k in names and v is not None})
        except (TypeError, ValueError, EvaluatorError) as exc:
            raise UserError(f"evaluator {self.name!r}: {exc}") from None

    def build(self, options: EvaluatorOptions) -> Evaluator:
        """The evaluator, for a command: a setup the user got wrong (no such device, no image) is a
        one-line ``UserError`` naming the evaluator, never a traceback."""
        from pike_harness.errors import UserError

        try:
            if self.config is not None and options.config is None:
                options = dataclasses.replace(options, config=self.config())
            return self.factory(options)
        except EvaluatorError as exc:
            raise UserError(f"evaluator {self.name!r}: {exc}") from None


class Evaluator(ABC):
    """Checks and times candidates. Thread-safe: strategies submit from many threads."""

    name: str = "evaluator"
    # How often a request is tried in all when the infrastructure fails it: this evaluator's own
    # retries (if it has any) and the run loop's together. One policy; evaluators share the default.
    retry_policy: EvalRetryPolicy = DEFAULT_RETRY

    @abstractmethod
    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        """Queue one evaluation. The future raises ``EvaluatorError`` only for infrastructure failures."""

    def evaluate(self, request: EvalRequest) -> EvalResult:
        return self.submit(request).result()

    def evaluate_many(self, requests: Iterable[EvalRequest]) -> Iterator[tuple[EvalRequest, EvalResult]]:
        """Yield (request, result) pairs in completion order."""
        futures = {self.submit(r): r for r in requests}
        for future in as_completed(futures):
            yield futures[future], future.result()

    def describe(self) -> dict[str, Any]:
        """Where evaluations run (devices, host, protocol), recorded in a run's metadata."""
        return {"evaluator": self.name}

    def precompile(self, requests: list[EvalRequest], *, jobs: int | None = None,
                   on_done: Callable[[EvalRequest, bool], None] | None = None) -> int | None:
        """Compile ``requests`` ahead (load and warm up, no timing) so their JIT caches are warm when
        they are timed; returns how many warmed up, or None when this evaluator cannot (the default:
        ``pikeh baselines`` then times without a precompile pass)."""
        return None

    def stats(self) -> dict[str, Any]:
        """Figures about the evaluations so far (the engine's scheduling, quiet timing, build cache);
        empty when the evaluator keeps none."""
        return {}

    def close(self) -> None:
        """Stop workers and release devices; pending futures are cancelled."""

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def evaluator_config(options: EvaluatorOptions, config_class: type[ConfigT]) -> ConfigT:
    """``options.config`` as the evaluator's ``config_class``: the class's defaults when the caller gave
    none (a library user building an evaluator directly); another type is the caller's bug, refused."""
    if options.config is None:
        return config_class()
    if not isinstance(options.config, config_class):
        raise EvaluatorError(f"options.config is a {type(options.config).__name__}, not the evaluator's "
                             f"{config_class.__name__}")
    return options.config


def check_protocol(options: EvaluatorOptions) -> None:
    """Refuse an unknown timing protocol (or bad protocol parameters) before any evaluation starts."""
    from pike_harness.worker.inside.protocols import get_protocol

    try:
        get_protocol(options.protocol, options.protocol_params)
    except KeyError as exc:
        raise EvaluatorError(str(exc.args[0])) from None


def apply_options(request: EvalRequest, options: EvaluatorOptions) -> EvalRequest:
    """The request as an evaluator runs it: the evaluator's protocol and, with ``--timeout``, its stage
    limits. Every evaluator applies its options the same way, so results are comparable across them."""
    changes: dict[str, Any] = {"protocol": options.protocol, "protocol_params": dict(options.protocol_params)}
    if options.timeout_s is not None:
        changes["limits"] = dataclasses.replace(request.limits, compile_timeout_s=options.timeout_s,
                                                run_timeout_s=options.timeout_s)
    return dataclasses.replace(request, **changes)
