"""The engine: submit, abort, precompile, describe, stats and close, over a resolved ``Plan``.

Building one is two steps: ``resolve`` (engine/options.py) checks every setting and fills every
default without touching the host; only then does ``Engine._start`` do what affects the whole host
(sweep processes an earlier, killed harness left, pin this process's cores, create folders, start
the reference and pre-started processes). A bad setting therefore leaves nothing behind.
"""

from __future__ import annotations

import itertools
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pike_harness.worker.records import EvalRequest, EvalResult
from pike_harness.worker.supervise import trusted_files
from pike_harness.worker.supervise.engine.devices import (
    DeviceProvider,
    Gate,
    LocalDevices,
    Oracle,
    Quiet,
    quietly,
)
from pike_harness.worker.supervise.engine.jobs import Job, JobTrace
from pike_harness.worker.supervise.engine.options import (
    EngineConfig,
    EngineError,
    Plan,
    for_isolation,
    make_private_folder,
    resolve,
)
from pike_harness.worker.supervise.engine.sequence import EvaluationSequence
from pike_harness.worker.supervise.engine.work_order import BUILD, WorkQueue, is_long, order_key, work_class
from pike_harness.worker.supervise.errors import InfrastructureError

if TYPE_CHECKING:
    from pike_harness.worker.supervise.scheduling import OrderedSlots

log = logging.getLogger("pikeh.engine")


class Engine:
    """Owns devices, CPU slots, caches and pre-started processes, and runs the evaluation sequence.

    Admission is bounded by ``jobs + max_ready`` threads, so at most ``max_ready`` loaded candidates
    (each holding a process and, on a GPU, a CUDA context) queue for the devices; further submissions
    wait, and every ordered resource (threads, CPU slots, process starts) serves them in the order
    ``engine.work_order`` gives (longest CPU work first by default). Thread-safe.
    """

    def __init__(self, config: EngineConfig | Plan | None = None, *, devices: DeviceProvider | None = None,
                 error_type: Callable[[str], BaseException] = InfrastructureError):
        """``config`` is resolved here unless it is a ``Plan`` already (a transport that builds its own
        ``devices`` from the plan, as a Ray device actor does)."""
        self.error_type = error_type
        self.plan = config if isinstance(config, Plan) else resolve(
            config or EngineConfig(), self._device_names(config or EngineConfig(), devices))
        self.config = self.plan.config
        self.devices = list(self.plan.devices)
        self.jobs, self.max_ready = self.plan.jobs, self.plan.max_ready
        self.prestart_per_device = self.plan.prestart_per_device
        self.jit_mode = self.plan.jit_mode
        self.cache_root = self.plan.cache_root
        self.load_cpus = set(self.plan.load_cpus) if self.plan.load_cpus else None
        self.timing_cpus = set(self.plan.timing_cpus) if self.plan.timing_cpus else None
        self.all_cpus = (self.load_cpus | self.timing_cpus) if self.load_cpus and self.timing_cpus else None
        self._own_cpus: set[int] | None = None
        self._own_workdir = self.config.workdir is None
        self.workdir = Path(self.config.workdir or tempfile.mkdtemp(prefix="pikeh-eval-")).absolute()
        self.prestart: Any = None
        self.build_cache: Any = None
        self.provider: DeviceProvider | None = None
        self.quiet: Quiet | None = None
        self._pool: WorkQueue | None = None
        self.slots: OrderedSlots  # set when the engine starts: the shared CPU slots
        self.long_slots: OrderedSlots | None = None  # the long jobs' own, with long_slots > 0
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._assigned = {device: 0 for device in self.devices}
        self._live: set[Any] = set()
        self._jobs: dict[Future, Job] = {}
        self.closing = False
        self._closed = False
        self._probing = False  # the toolchain probe has been started (_probe_toolchains)
        self.traces: list[JobTrace] = []
        self.first_submit: float | None = None
        self.last_done: float | None = None
        try:
            self._start(devices)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _device_names(config: EngineConfig, devices: DeviceProvider | None) -> list[str]:
        from pike_harness.worker.supervise.devices import resolve_devices

        if devices is not None:
            return list(devices.devices)
        try:
            return resolve_devices(config.device)
        except ValueError as exc:
            raise EngineError(str(exc)) from None

    def _start(self, devices: DeviceProvider | None) -> None:
        """Everything that touches the host, in order; run only once the plan is known to be good."""
        from pike_harness.worker.supervise.buildcache import BuildCache
        from pike_harness.worker.supervise.exchange import sweep_exchange_folders
        from pike_harness.worker.supervise.noise import NoiseWatch
        from pike_harness.worker.supervise.prestart import PrestartPool
        from pike_harness.worker.supervise.sandbox import sweep_orphans
        from pike_harness.worker.supervise.scheduling import OrderedSlots
        from pike_harness.worker.supervise.spawn import set_affinity
        from pike_harness.worker.supervise.supervisor import WorkerSettings

        config = self.config
        isolation = _isolation(config)
        # Shared caches only where the sandbox hides them from candidates (a refused setting creates nothing).
        self.plan = plan = for_isolation(self.plan, isolation)
        self.cache_root, self.jit_mode = plan.cache_root, plan.jit_mode
        if plan.cache_note:
            log.info("%s", plan.cache_note)
        make_private_folder(self.workdir, "the work folder")
        if plan.cache_root is not None:
            make_private_folder(plan.cache_root, "the build cache folder")
        # Candidates and builders never see the work folder (reference outputs, others' scratch).
        self.isolation = replace(isolation, hidden=(*isolation.hidden, str(self.workdir)))
        swept = sweep_orphans()
        if swept:
            log.warning("killed %d process(es) left by an earlier harness that was killed "
                        "(candidates it had paused for quiet timing never resume by themselves)", swept)
        sweep_exchange_folders()  # shared memory a killed harness left behind

        if self.load_cpus:  # the harness's own threads (policing, comparing) stay off the timing cores too
            self._own_cpus = set(os.sched_getaffinity(0))
            set_affinity(os.getpid(), self.load_cpus)
        self.provider = devices or LocalDevices(plan, self.workdir / "reference", environ=config.environ)
        self.quiet = self.provider.quiet
        self.quiet_scope = ("host" if self.quiet.host_wide else "device") if self.quiet is not None else None
        self.build_cache = (BuildCache(plan.cache_root / "build", cpus=self.load_cpus, registry=self.quiet,
                                       isolation=self.isolation) if plan.cache_root is not None else None)
        self.settings = WorkerSettings(
            workdir=self.workdir, build_cache=self.build_cache, cpus=self.load_cpus, environ=config.environ,
            isolation=self.isolation, noise=NoiseWatch(plan.noise), paired_cores=plan.paired_cores,
            fresh_inputs=plan.fresh_inputs,
            jit_cache_root=(plan.cache_root / "jit") if plan.jit_mode == "shared" and plan.cache_root else None)
        self.settings.start_slots = OrderedSlots(plan.start_slots)
        self.settings.quiet = self.quiet
        self.prestart = (PrestartPool(self.settings, self.devices, plan.prestart_per_device, cpus=self.load_cpus,
                                      registry=self.quiet) if plan.prestart_per_device > 0 else None)
        self.settings.prestart = self.prestart
        self.slots = OrderedSlots(plan.jobs)
        self.long_slots = OrderedSlots(plan.long_slots) if plan.long_slots > 0 else None
        self._pool = WorkQueue(plan.capacity, plan.build_slots, long_threads=plan.long_slots)

    def cpu_slots(self, job: Job) -> OrderedSlots:
        """The CPU slots ``job`` loads in: the long jobs' own (``long_slots``), else the shared ones."""
        if self.long_slots is not None and is_long(job.key):
            return self.long_slots
        return self.slots

    @property
    def capacity(self) -> int:
        """Evaluations the engine works on at once (loading or waiting for a device); more queue."""
        return self.jobs + self.max_ready

    @property
    def gates(self) -> dict[str, Gate]:
        return {device: self.gate(device) for device in self.devices}

    def gate(self, device: str) -> Gate:
        """The device's gate (from the provider the engine started with)."""
        assert self.provider is not None, "the engine has started"
        return self.provider.gate(device)

    def oracle(self, device: str) -> Oracle:
        """The device's trusted reference."""
        assert self.provider is not None, "the engine has started"
        return self.provider.oracle(device)

    # -- submission ------------------------------------------------------------------------------
    def submit(self, request: EvalRequest, *, fixed_device: bool | None = None,
               on_event: Callable[[str, Any], None] | None = None) -> Future[EvalResult]:
        """Queue one evaluation; see the module docstring for ``fixed_device`` and ``on_event``."""
        if self.closing:
            raise self.error_type("this evaluator is closed")
        if fixed_device is None:
            fixed_device = request.device in self.devices
        elif fixed_device and request.device not in self.devices:
            raise self.error_type(f"device {request.device} is not one of this engine's ({', '.join(self.devices)})")
        seq = next(self._seq)
        now = time.monotonic()
        trace = JobTrace(seq=seq, task=request.task, submitted=now)
        future: Future[EvalResult] = Future()
        trace.work_class = work_class(request.candidate_source, request.baseline_mode)
        key = order_key(self.plan.cpu_order, seq, trace.work_class)
        job = Job(seq=seq, request=request, fixed_device=fixed_device, future=future, trace=trace,
                  on_event=on_event, key=key)
        with self._lock:
            if self.first_submit is None:
                self.first_submit = now
            self.traces.append(trace)
            self._jobs[future] = job
        future.add_done_callback(self._forget)
        if trace.work_class == BUILD:
            self._probe_toolchains()
        assert self._pool is not None
        self._pool.put(key, EvaluationSequence(self, job).run)
        return future

    def _probe_toolchains(self) -> None:
        """Start the build cache's toolchain probe (a Python that imports torch and asks the compilers
        for their versions: about 3.5 s of CPU on the 2-core VM) in the background, once: at the first
        submitted candidate whose source calls ``load_inline``, so that its build does not wait for it,
        and never in an engine that builds nothing. A build the source scan missed probes when it asks."""
        with self._lock:
            if self.build_cache is None or self._probing:
                return
            self._probing = True
        threading.Thread(target=quietly, args=(self.build_cache.prefetch, self.devices), name="pikeh-probe",
                         daemon=True).start()

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._jobs.pop(future, None)

    def abort(self, futures: list[Future]) -> None:
        """Stop these evaluations: queued ones are cancelled, running ones killed (their futures
        raise ``error_type``). For transports and callers that no longer need a verdict."""
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

    def pick_device(self, job: Job) -> str:
        """The job's device: its own when fixed, else the least busy (more pre-started processes wins ties)."""
        with self._lock:
            if job.fixed_device:
                device = job.request.device
            else:
                prestart = self.prestart

                def load(d: str) -> tuple[int, int]:
                    ready = prestart.ready_count(d) if prestart is not None else 0
                    return self._assigned[d], -ready

                device = min(self.devices, key=load)
            self._assigned[device] += 1
            return device

    def track(self, job: Job, evaluation: Any) -> None:
        """A job's evaluation has started loading: ``abort`` and ``close`` can now kill it."""
        with self._lock:
            self._live.add(evaluation)
            job.evaluation = evaluation
            if job.aborted or self.closing:
                evaluation.abort()

    def untrack(self, evaluation: Any, device: str | None) -> None:
        """A job has ended: its evaluation is no longer live, and its device has one job fewer."""
        with self._lock:
            self._live.discard(evaluation)
            if device is not None:
                self._assigned[device] -= 1

    # -- compile ahead ---------------------------------------------------------------------------
    def precompile(self, requests: list[EvalRequest], *, jobs: int | None = None,
                   on_done: Callable[[EvalRequest, bool], None] | None = None) -> int:
        """Load and warm up ``requests`` in parallel, without checking or timing them; returns how
        many warmed up. With shared JIT caches this fills Triton's and Inductor's caches, so the
        compile at the first call of the real evaluation is a cache hit (``pikeh baselines`` uses it
        before timing torch.compile baselines). The warm-up calls run on the devices: call this only
        while nothing is being timed."""
        from pike_harness.worker.supervise.supervisor import Evaluation

        devices = iter(self.devices * (len(requests) // max(1, len(self.devices)) + 1))
        work = [(replace(r, device=next(devices)), r) for r in requests]

        def one(item: tuple[EvalRequest, EvalRequest]) -> bool:
            request, original = item
            evaluation = Evaluation(request, self.oracle(request.device), self.settings)
            try:
                ok = evaluation.load() is None and evaluation.warm() is None
            except InfrastructureError:
                ok = False
            finally:
                evaluation.close()
            if on_done is not None:
                on_done(original, ok)
            return ok

        with ThreadPoolExecutor(max_workers=max(1, jobs or self.jobs), thread_name_prefix="pikeh-precompile") as pool:
            return sum(pool.map(one, work))

    # -- description, statistics, life cycle -----------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The engine's settings as it resolved them (recorded in a run's metadata)."""
        from pike_harness.worker.environment import host_info

        return {"devices": list(self.devices), "jobs": self.jobs,
                "scheduling": {"cpu_slots": self.jobs, "max_ready": self.max_ready,
                               "prestart_per_device": self.prestart_per_device, "prewarm": self.plan.prewarm,
                               "cpu_order": self.plan.cpu_order, "start_slots": self.plan.start_slots,
                               "build_slots": self.plan.build_slots, "long_slots": self.plan.long_slots,
                               "quiet_mode": self.plan.quiet_mode, "fresh_inputs": self.plan.fresh_inputs,
                               "quiet_timing": self.quiet is not None, "quiet_scope": self.quiet_scope,
                               "check_slots": {d: gate.check_slots for d, gate in self.gates.items()},
                               "timing_cpus": sorted(self.timing_cpus) if self.timing_cpus else None,
                               "build_cache": str(self.cache_root / "build") if self.build_cache and self.cache_root else None,
                               "jit_cache": self.jit_mode, "cache_note": self.plan.cache_note},
                "noise": {"canary_tolerance": self.plan.noise.canary_tolerance,
                          "max_steal": self.plan.noise.max_steal, "redo": self.plan.noise.redo},
                "isolation": self.isolation.label,
                "host": host_info()}

    def stats(self, stages: bool = False) -> dict[str, Any]:
        """Device busy fractions, queueing, quiet-timing, build-cache and pre-start figures since the
        first submission (benchmarks and the cross-evaluator acceptance test read these).

        ``stages``: also the run's ``stage_breakdown`` (each candidate's time by stage, each device's
        idle time by cause) under "stages". Off by default: a queue worker writes its figures after
        every result, and the per-candidate list grows with the run."""
        end = self.last_done or time.monotonic()
        wall = (end - self.first_submit) if self.first_submit is not None else 0.0
        devices = {}
        for name, gate in self.gates.items():
            figures = gate.stats.to_dict()
            figures["busy_fraction"] = figures.get("busy_s", 0.0) / wall if wall > 0 else 0.0
            figures["reference"] = self.oracle(name).figures()
            devices[name] = figures
        with self._lock:
            categories: dict[str, int] = {}
            for trace in self.traces:
                if trace.category is not None:
                    categories[trace.category] = categories.get(trace.category, 0) + 1
            warmed = sum(1 for trace in self.traces if trace.warmed)
            timed = sum(1 for trace in self.traces if trace.timing_start is not None)
        out: dict[str, Any] = {"wall_s": wall, "devices": devices, "cpu_slots": self.jobs,
                               "max_ready": self.max_ready, "evaluations": len(self.traces),
                               "categories": categories, "warmed": warmed, "timed": timed}
        if self.quiet is not None:
            out["quiet"] = {"pauses": self.quiet.pauses, "paused_s": self.quiet.paused_s}
        if self.build_cache is not None:
            out["build_cache"] = self.build_cache.stats.to_dict()
        if self.plan.cache_note:
            out["cache_note"] = self.plan.cache_note
        if self.prestart is not None:
            out["prestart"] = {"served": self.prestart.served, "missed": self.prestart.missed}
        starts = self.settings.start_slots
        out["start_slots"] = {"slots": starts.slots, "starts": starts.granted, "most_at_once": starts.most_held}
        if stages:
            from pike_harness.worker.supervise.engine.stage_breakdown import breakdown

            with self._lock:
                traces = list(self.traces)
            out["stages"] = breakdown(traces, self.devices, self.first_submit, end)
        return out

    def close(self) -> None:
        """Abort evaluations in flight (their processes are killed), cancel queued ones, stop the
        pre-started and reference processes, and give back the cores and folders it took. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = self.closing = True
            live = list(self._live)
            for job in self._jobs.values():
                job.aborted = True
        for evaluation in live:
            evaluation.abort()
        if self._pool is not None:
            self._pool.shutdown()
        with self._lock:
            never_started = [job.future for job in self._jobs.values()]
        for future in never_started:  # queued behind the pool's threads: nobody else would end them
            future.cancel()
        if self.prestart is not None:
            self.prestart.close()
        if self.provider is not None:
            self.provider.close()
        if self._own_cpus:
            from pike_harness.worker.supervise.spawn import set_affinity

            set_affinity(os.getpid(), self._own_cpus)
        if self._own_workdir:
            trusted_files.remove_tree(self.workdir)  # never recursive, never follows a candidate's link

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _isolation(config: EngineConfig) -> Any:
    """The sandbox candidates run in (``isolation.choose``); a host that cannot make one is an EngineError."""
    from pike_harness.worker.supervise.isolation import SandboxUnavailable, choose

    home = (config.environ if config.environ is not None else os.environ).get("HOME")
    try:
        return choose(unsafe=bool(config.unsafe_no_sandbox), optional=bool(config.sandbox_optional), home=home,
                      extra_hidden=config.hidden_paths)
    except SandboxUnavailable as exc:
        raise EngineError(str(exc)) from None
