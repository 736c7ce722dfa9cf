"""The ``local`` evaluator: candidates checked and timed on this host's GPUs, or on its CPU.

A thin transport around the evaluation engine (``pike_harness.worker.supervise.engine``), run in this process:
the engine owns the devices (FIFO gate, quiet timing, one trusted reference process each), the CPU
slots, the build cache, pre-started candidate processes and CPU pinning, and runs each candidate's
load -> warm -> wait for the device -> check -> time sequence. This plugin turns the command line's
options into an ``EngineConfig`` and the engine's failures into ``EvaluatorError``. The ``queue`` and
``docker`` workers run the same engine, so a verdict never depends on the evaluator. See
docs/evaluator.md.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from pike_harness.api import (
    EvalRequest,
    EvalResult,
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    EvaluatorSpec,
    apply_options,
    check_protocol,
    evaluator_config,
    hookimpl,
)
from pike_harness.worker.api import EngineOptions


class LocalEvaluator(Evaluator):
    """The evaluation engine in this process."""

    name = "local"
    Config = EngineOptions

    def __init__(self, options: EvaluatorOptions):
        from pike_harness.worker.api import Engine, EngineConfig, EngineError

        check_protocol(options)
        self.options = options
        config = EngineConfig.from_values(evaluator_config(options, self.Config), device=options.device,
                                          workdir=options.workdir)
        try:
            self.engine = Engine(config, error_type=EvaluatorError)
        except EngineError as exc:
            raise EvaluatorError(str(exc)) from None
        self.devices = self.engine.devices
        self.workdir = self.engine.workdir

    def prepare(self, request: EvalRequest) -> EvalRequest:
        """The request as this evaluator runs it: its protocol and stage limits (the device is chosen
        when the evaluation starts loading, unless the request names one of this evaluator's devices)."""
        return apply_options(request, self.options)

    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        return self.engine.submit(self.prepare(request))

    def precompile(self, requests: list[EvalRequest], *, jobs: int | None = None, on_done: Any = None) -> int | None:
        """Load and warm up ``requests`` without timing them, filling the shared JIT caches (None when
        the caches are private: there is nothing to fill)."""
        if self.engine.jit_mode != "shared":
            return None
        return self.engine.precompile([self.prepare(r) for r in requests], jobs=jobs, on_done=on_done)

    def describe(self) -> dict[str, Any]:
        from pike_harness.worker.api import get_protocol

        protocol = get_protocol(self.options.protocol, self.options.protocol_params)
        engine = self.engine.describe()
        return {"evaluator": self.name, **engine,
                "protocol": {**protocol.describe(), "params": dict(self.options.protocol_params)}}

    def abort(self, futures: list[Future[EvalResult]]) -> None:
        """Cancel or kill these evaluations (their futures end with EvaluatorError or cancelled)."""
        self.engine.abort(futures)

    def stats(self) -> dict[str, Any]:
        """The engine's scheduling, quiet-timing, build-cache and pre-start figures, and where each
        candidate's time went ("stages": read on demand, never written per result)."""
        return self.engine.stats(stages=True)

    def close(self) -> None:
        self.engine.close()


@hookimpl
def register_evaluators(register) -> None:
    register(EvaluatorSpec(
        name="local",
        factory=LocalEvaluator,
        config=EngineOptions,
        description="this host's GPUs (or its CPU): one sandboxed process per candidate, loads in parallel, "
                    "exclusive per-device lock for correctness and timing",
    ))
