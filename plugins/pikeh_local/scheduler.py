"""The local evaluator's scheduler: loads in parallel on CPU slots, one timing at a time per device.

One thread per admitted evaluation drives the worker's two-phase API:

1. take a CPU slot (FIFO by submission), pick the least busy device, start or adopt the candidate's
   process, ``load()`` it (imports and ``load_inline`` builds), optionally ``warm()`` it (one call,
   so Triton/``torch.compile`` compile here), then give the slot back: a loaded candidate that waits
   for its device holds no CPU slot;
2. wait for the device (``DeviceGate``: the oldest ready candidate gets it the moment it is free),
   ``finish()`` (correctness and timing) while holding it, release it, clean up.

Admission is bounded by ``cpu_slots + max_ready`` threads, so at most ``max_ready`` loaded candidates
(each holding a process and a CUDA context) queue for the devices. With quiet timing, every other
process bound to the device is paused while a candidate is timed (see ``worker.scheduling``).
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from pike_harness.api import EvalRequest, EvalResult, EvaluatorError

JIT_FLAGS = ("technique:triton", "technique:torch.compile")
PREWARM_CHOICES = ("off", "jit", "all")


@dataclass
class JobTrace:
    """When one evaluation passed each point (time.monotonic seconds); for tests and benchmarks."""

    seq: int
    task: str
    submitted: float
    device: str | None = None
    load_start: float | None = None
    loaded: float | None = None
    granted: float | None = None
    timing_start: float | None = None
    timing_end: float | None = None
    released: float | None = None
    done: float | None = None
    category: str | None = None
    warmed: bool = False
    prestarted: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Job:
    seq: int
    request: EvalRequest
    fixed_device: bool
    future: Future
    trace: JobTrace
    evaluation: Any = None
    aborted: bool = False


class Scheduler:
    """Owns the slots, the device gates, the quiet registry and the evaluation threads."""

    def __init__(self, devices: list[str], oracles: dict[str, Any], settings: Any, *, cpu_slots: int,
                 max_ready: int, prewarm: str = "jit", quiet: Any = None, all_cpus: set[int] | None = None):
        from pike_harness.worker.scheduling import DeviceGate, FifoSlots

        self.devices = list(devices)
        self.oracles = oracles
        self.settings = settings
        self.cpu_slots = max(1, int(cpu_slots))
        self.max_ready = max(0, int(max_ready))
        self.prewarm = prewarm
        self.quiet = quiet
        self.all_cpus = all_cpus  # widen a candidate to these when it takes the device (None: no pinning)
        self.slots = FifoSlots(self.cpu_slots)
        self.gates = {device: DeviceGate(device) for device in self.devices}
        self._pool = ThreadPoolExecutor(max_workers=self.cpu_slots + self.max_ready,
                                        thread_name_prefix="pikeh-local")
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._assigned = {device: 0 for device in self.devices}
        self._live: set[Any] = set()
        self._jobs: dict[Future, _Job] = {}
        self._closing = False
        self.traces: list[JobTrace] = []
        self.first_submit: float | None = None
        self.last_done: float | None = None

    # -- submission ------------------------------------------------------------------------------
    def submit(self, request: EvalRequest, *, fixed_device: bool) -> Future[EvalResult]:
        seq = next(self._seq)
        now = time.monotonic()
        trace = JobTrace(seq=seq, task=request.task, submitted=now)
        with self._lock:
            if self.first_submit is None:
                self.first_submit = now
            self.traces.append(trace)
        future: Future[EvalResult] = Future()
        job = _Job(seq=seq, request=request, fixed_device=fixed_device, future=future, trace=trace)
        with self._lock:
            self._jobs[future] = job
        future.add_done_callback(self._forget)
        self._pool.submit(self._run, job)
        return future

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._jobs.pop(future, None)

    def abort(self, futures: list[Future]) -> None:
        """Stop these evaluations: queued ones are cancelled, running ones killed (their futures
        raise EvaluatorError). For benchmarks and callers that no longer need a verdict."""
        for future in futures:
            if future.cancel():
                continue
            with self._lock:
                job = self._jobs.get(future)
                if job is None:
                    continue
                job.aborted = True  # a job still waiting for its slot stops when it gets one
                evaluation = job.evaluation
            if evaluation is not None:
                evaluation.abort()

    def _pick_device(self, job: _Job) -> str:
        with self._lock:
            if job.fixed_device:
                device = job.request.device
            else:
                prestart = self.settings.prestart

                def load(d: str) -> tuple[int, int]:
                    ready = prestart.ready_count(d) if prestart is not None else 0
                    return self._assigned[d], -ready

                device = min(self.devices, key=load)
            self._assigned[device] += 1
            return device

    # -- one evaluation --------------------------------------------------------------------------
    def _run(self, job: _Job) -> None:
        from pike_harness.worker.errors import InfrastructureError
        from pike_harness.worker.supervisor import Evaluation

        if not job.future.set_running_or_notify_cancel():
            return
        trace = job.trace
        device: str | None = None
        evaluation = None
        quiet_token = None
        slot_held = False
        try:
            self.slots.acquire(job.seq)
            slot_held = True
            if self._closing or job.aborted:
                raise InfrastructureError("the evaluation was aborted")
            device = self._pick_device(job)
            trace.device, trace.load_start = device, time.monotonic()
            request = replace(job.request, device=device)
            evaluation = Evaluation(request, self.oracles[device], self.settings)
            with self._lock:
                self._live.add(evaluation)
                job.evaluation = evaluation
                if job.aborted or self._closing:
                    evaluation.abort()
            timing_quiet: list[Any] = []

            def listener(event: str, ev: Any) -> None:
                nonlocal quiet_token
                if event == "spawned" and self.quiet is not None:
                    quiet_token = self.quiet.add(ev.popen.pid, ev.marker, device)
                    registry, token = self.quiet, quiet_token
                    ev.paused_s = lambda: registry.paused_seconds(token)
                elif event == "timing_start":
                    trace.timing_start = time.monotonic()
                    if self.quiet is not None:
                        context = self.quiet.quiet(device, ev.session)
                        context.__enter__()
                        timing_quiet.append(context)
                elif event == "timing_end":
                    trace.timing_end = time.monotonic()
                    while timing_quiet:
                        timing_quiet.pop().__exit__(None, None, None)

            evaluation.listener = listener
            result = evaluation.load()
            trace.prestarted = bool(evaluation.environment.get("prestarted"))
            if result is None and self._wants_warm(evaluation):
                trace.warmed = True
                result = evaluation.warm()
            trace.loaded = time.monotonic()
            self.slots.release()
            slot_held = False
            if result is None:
                result = self._on_device(job, evaluation, device, lambda: quiet_token)
            trace.category = result.category
            evaluation.close()
            trace.done = self.last_done = time.monotonic()
            job.future.set_result(result)
        except InfrastructureError as exc:
            trace.category = "infrastructure_error"
            job.future.set_exception(EvaluatorError(str(exc)))
        except BaseException as exc:  # a bug: the caller sees it rather than a future that never ends
            trace.category = "bug"
            job.future.set_exception(exc)
        finally:
            if trace.done is None:
                trace.done = time.monotonic()
            if slot_held:
                self.slots.release()
            if quiet_token is not None and self.quiet is not None:
                self.quiet.remove(quiet_token)
            if evaluation is not None:
                evaluation.close()
                with self._lock:
                    self._live.discard(evaluation)
            if device is not None:
                with self._lock:
                    self._assigned[device] -= 1

    def _on_device(self, job: _Job, evaluation: Any, device: str, token: Any) -> EvalResult:
        """Phase 2: wait for the device (policing), then correctness and timing while holding it."""
        from pike_harness.worker.spawn import set_session_affinity

        ticket = self.gates[device].ticket(job.seq)
        try:
            early = evaluation.wait_for(ticket)
        except BaseException:
            ticket.cancel()
            raise
        if early is not None:
            ticket.cancel()
            return early
        job.trace.granted = time.monotonic()
        try:
            if self.quiet is not None and token() is not None:
                self.quiet.remove(token())  # the candidate holding the device is never paused
            if self.all_cpus and evaluation.session is not None:
                set_session_affinity(evaluation.session, self.all_cpus)
            return evaluation.finish()
        finally:
            ticket.release()
            job.trace.released = time.monotonic()

    def _wants_warm(self, evaluation: Any) -> bool:
        from pike_harness.worker.baseline_modes import JIT_MODES

        if self.prewarm == "all":
            return True
        if self.prewarm == "jit":
            return (any(flag in evaluation.flags for flag in JIT_FLAGS)
                    or evaluation.request.baseline_mode in JIT_MODES)
        return False

    # -- lifecycle and statistics ----------------------------------------------------------------
    def close(self) -> None:
        """Abort evaluations in flight (their processes are killed), cancel queued ones, stop threads."""
        with self._lock:
            self._closing = True
            live = list(self._live)
            for job in self._jobs.values():
                job.aborted = True
        for evaluation in live:
            evaluation.abort()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def stats(self) -> dict[str, Any]:
        """Device busy fractions and queueing figures since the first submission."""
        end = self.last_done or time.monotonic()
        wall = (end - self.first_submit) if self.first_submit is not None else 0.0
        devices = {}
        for name, gate in self.gates.items():
            figures = gate.stats.to_dict()
            figures["busy_fraction"] = figures["busy_s"] / wall if wall > 0 else 0.0
            devices[name] = figures
        out: dict[str, Any] = {"wall_s": wall, "devices": devices, "cpu_slots": self.cpu_slots,
                               "max_ready": self.max_ready, "evaluations": len(self.traces)}
        if self.quiet is not None:
            out["quiet"] = {"pauses": self.quiet.pauses, "paused_s": self.quiet.paused_s}
        return out
