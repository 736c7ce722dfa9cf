"""The ``local`` evaluator: candidates checked and timed on this host's GPUs, or on its CPU.

Every evaluation runs the worker's supervisor (``pike_harness.worker.supervisor``) in a sandboxed
process of its own. The scheduler (``scheduler.py``) runs loading (imports, ``load_inline`` builds,
an optional warm-up call for JIT compilers) in parallel on CPU slots, then hands each device to the
oldest loaded candidate the moment it is free, so correctness and timing never share a device and a
device never waits while a candidate is ready. Around that: pre-started candidate processes, the
content-addressed build cache, per-source Triton/Inductor caches, quiet timing and CPU partitioning.
One trusted reference process per device computes the reference outputs. See docs/evaluator.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from pike_harness.api import (
    EvalRequest,
    EvalResult,
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    EvaluatorSpec,
    apply_options,
    check_protocol,
    hookimpl,
)

from .scheduler import PREWARM_CHOICES, Scheduler

log = logging.getLogger(__name__)

CACHE_ENV = "PIKEH_CACHE_DIR"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_cpu_slots(devices: list[str]) -> int:
    """Cores minus one per GPU (its timing) minus one (the harness and the reference processes)."""
    gpus = sum(1 for d in devices if d.startswith("cuda"))
    return max(1, usable_cores() - gpus - 1)


def default_cache_root() -> Path:
    """Where builds and JIT caches persist between runs: $PIKEH_CACHE_DIR, else the user's cache folder."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pike-harness"


def _quietly(function: Any, *args: Any) -> None:
    """Run a head start in the background; if it fails, the first real use reports the error."""
    with contextlib.suppress(Exception):
        function(*args)


class LocalEvaluator(Evaluator):
    """The scheduler over the worker's supervisor, with one reference process per device."""

    name = "local"

    def __init__(self, options: EvaluatorOptions):
        from pike_harness.worker.buildcache import BuildCache
        from pike_harness.worker.devices import resolve_devices
        from pike_harness.worker.prestart import PrestartPool
        from pike_harness.worker.reference import ReferenceOracle
        from pike_harness.worker.sandbox import sweep_orphans
        from pike_harness.worker.scheduling import QuietRegistry, cpu_partition
        from pike_harness.worker.supervisor import WorkerSettings

        check_protocol(options)
        swept = sweep_orphans()
        if swept:
            log.warning("killed %d process(es) left by an earlier harness that was killed "
                        "(candidates it had paused for quiet timing never resume by themselves)", swept)
        extra = options.extra
        self.options = options
        try:
            self.devices = resolve_devices(options.device)
        except ValueError as exc:
            raise EvaluatorError(str(exc)) from None
        self._own_workdir = options.workdir is None
        self.workdir = Path(options.workdir or tempfile.mkdtemp(prefix="pikeh-eval-"))
        self.workdir.mkdir(parents=True, exist_ok=True)

        self.jobs = int(extra.get("jobs") or default_cpu_slots(self.devices))
        max_ready = extra.get("max_ready")
        self.max_ready = int(max_ready) if max_ready is not None else max(2, 2 * len(self.devices))
        prestart = extra.get("prestart")
        self.prestart_per_device = int(prestart) if prestart is not None else 2
        self.prewarm = str(extra.get("prewarm") or "jit")
        if self.prewarm not in PREWARM_CHOICES:
            raise EvaluatorError(f"--prewarm must be one of {', '.join(PREWARM_CHOICES)}")
        quiet = extra.get("quiet_timing")
        scope = extra.get("quiet_scope") or ("host" if len(self.devices) <= 1 else "device")
        if scope not in ("host", "device"):
            raise EvaluatorError("--quiet-scope must be host or device")
        self.quiet = QuietRegistry(host_wide=scope == "host") if quiet is None or quiet else None
        pin = extra.get("pin_cpus")
        load_cpus, timing_cpus = cpu_partition(self.devices) if pin is None or pin else (None, None)
        self.load_cpus, self.timing_cpus = load_cpus, timing_cpus
        self._own_cpus: set[int] | None = None
        if load_cpus:  # the harness's own threads (policing, comparing) stay off the timing cores too
            from pike_harness.worker.spawn import set_affinity

            self._own_cpus = set(os.sched_getaffinity(0))
            set_affinity(os.getpid(), load_cpus)

        cache_root = self._cache_root(extra.get("build_cache"))
        self.cache_root = cache_root
        jit_mode = str(extra.get("jit_cache") or "shared")
        if jit_mode not in ("shared", "private"):
            raise EvaluatorError("--jit-cache must be shared or private")
        self.jit_mode = jit_mode if cache_root is not None else "private"
        self.build_cache = (BuildCache(cache_root / "build", cpus=load_cpus, registry=self.quiet)
                            if cache_root is not None else None)
        self.settings = WorkerSettings(
            workdir=self.workdir, build_cache=self.build_cache, cpus=load_cpus,
            jit_cache_root=(cache_root / "jit") if self.jit_mode == "shared" and cache_root is not None else None)
        self.prestart = (PrestartPool(self.settings, self.devices, self.prestart_per_device, cpus=load_cpus,
                                      registry=self.quiet) if self.prestart_per_device > 0 else None)
        self.settings.prestart = self.prestart
        self.oracles = {device: ReferenceOracle(device, self.workdir / "reference") for device in self.devices}
        for oracle in self.oracles.values():  # pay the reference process's start-up now, in the background
            threading.Thread(target=_quietly, args=(oracle.start,), name="pikeh-reference-start",
                             daemon=True).start()
        if self.build_cache is not None:  # and the toolchain probe, which the first build would wait for
            threading.Thread(target=_quietly, args=(self.build_cache.prefetch, self.devices),
                             name="pikeh-probe", daemon=True).start()
        all_cpus = (load_cpus | timing_cpus) if load_cpus and timing_cpus else None
        self.scheduler = Scheduler(self.devices, self.oracles, self.settings, cpu_slots=self.jobs,
                                   max_ready=self.max_ready, prewarm=self.prewarm, quiet=self.quiet,
                                   all_cpus=all_cpus)
        self._closed = False

    @staticmethod
    def _cache_root(value: Any) -> Path | None:
        if value is not None and str(value).strip().lower() in ("off", "none", "no", ""):
            return None
        root = Path(value) if value else default_cache_root()
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise EvaluatorError(f"cannot create the build cache folder {root}: {exc}") from None
        return root

    def prepare(self, request: EvalRequest) -> EvalRequest:
        """The request as this evaluator runs it: its protocol and stage limits (the device is chosen
        when the evaluation starts loading, unless the request names one of this evaluator's devices)."""
        return apply_options(request, self.options)

    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        if self._closed:
            raise EvaluatorError("this evaluator is closed")
        return self.scheduler.submit(self.prepare(request), fixed_device=request.device in self.devices)

    def precompile(self, requests: list[EvalRequest], *, jobs: int | None = None,
                   on_done: Any = None) -> int:
        """Load and warm up ``requests`` in parallel, without checking or timing them; returns how
        many warmed up. With shared JIT caches this fills Triton's and Inductor's caches, so the
        compile at the first call of the real evaluation is a cache hit (``pikeh baselines`` uses it
        before timing torch.compile baselines). The warm-up calls run on the devices: call this only
        while nothing is being timed."""
        from pike_harness.worker.errors import InfrastructureError
        from pike_harness.worker.supervisor import Evaluation

        devices = iter(self.devices * (len(requests) // max(1, len(self.devices)) + 1))
        work = [(replace(self.prepare(r), device=next(devices)), r) for r in requests]

        def one(item: tuple[EvalRequest, EvalRequest]) -> bool:
            request, original = item
            evaluation = Evaluation(request, self.oracles[request.device], self.settings)
            try:
                ok = evaluation.load() is None and evaluation.warm() is None
            except InfrastructureError:
                ok = False
            finally:
                evaluation.close()
            if on_done is not None:
                on_done(original, ok)
            return ok

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, jobs or self.jobs), thread_name_prefix="pikeh-precompile") as pool:
            return sum(pool.map(one, work))

    def describe(self) -> dict[str, Any]:
        from pike_harness.worker.environment import host_info
        from pike_harness.worker.protocols import get_protocol

        protocol = get_protocol(self.options.protocol, self.options.protocol_params)
        return {"evaluator": self.name, "devices": self.devices, "jobs": self.jobs,
                "protocol": {**protocol.describe(), "params": dict(self.options.protocol_params)},
                "scheduling": {"cpu_slots": self.jobs, "max_ready": self.max_ready,
                               "prestart_per_device": self.prestart_per_device, "prewarm": self.prewarm,
                               "quiet_timing": self.quiet is not None,
                               "quiet_scope": ("host" if self.quiet.host_wide else "device") if self.quiet else None,
                               "timing_cpus": sorted(self.timing_cpus) if self.timing_cpus else None,
                               "build_cache": str(self.cache_root / "build") if self.build_cache else None,
                               "jit_cache": self.jit_mode},
                "host": host_info()}

    def abort(self, futures: list[Future[EvalResult]]) -> None:
        """Cancel or kill these evaluations (their futures end with EvaluatorError or cancelled)."""
        self.scheduler.abort(futures)

    def stats(self) -> dict[str, Any]:
        """Scheduling, build-cache and pre-start figures (benchmarks read these)."""
        out = self.scheduler.stats()
        if self.build_cache is not None:
            out["build_cache"] = self.build_cache.stats.to_dict()
        if self.prestart is not None:
            out["prestart"] = {"served": self.prestart.served, "missed": self.prestart.missed}
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.scheduler.close()
        if self.prestart is not None:
            self.prestart.close()
        for oracle in self.oracles.values():
            oracle.close()
        if self._own_cpus:
            from pike_harness.worker.spawn import set_affinity

            set_affinity(os.getpid(), self._own_cpus)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


@hookimpl
def register_evaluators(register) -> None:
    register(EvaluatorSpec(
        name="local",
        factory=LocalEvaluator,
        description="this host's GPUs (or its CPU): one sandboxed process per candidate, loads in parallel, "
                    "exclusive per-device lock for correctness and timing",
        options=[
            click.Option(["--jobs"], type=click.IntRange(min=1), default=None,
                         help="[local] CPU slots: candidates loading/compiling at once (checking and timing "
                              "take turns per device). Default: cores - GPUs - 1."),
            click.Option(["--prestart"], type=click.IntRange(min=0), default=None,
                         help="[local] Idle pre-started candidate processes per device (torch and CUDA "
                              "initialised; each serves one candidate). Default 2; 0 turns it off."),
            click.Option(["--build-cache"], default=None, metavar="DIR|off",
                         help=f"[local] Content-addressed load_inline build cache and shared JIT caches. "
                              f"Default: ${CACHE_ENV} or ~/.cache/pike-harness; 'off' builds every "
                              "candidate from scratch."),
            click.Option(["--jit-cache"], type=click.Choice(["shared", "private"]), default=None,
                         help="[local] Triton/Inductor caches: shared between identical candidate sources "
                              "(default) or private to each evaluation."),
            click.Option(["--prewarm"], type=click.Choice(list(PREWARM_CHOICES)), default=None,
                         help="[local] One call while loading, so JIT compiles run outside the device lock: "
                              "jit (candidates using Triton or torch.compile; default), all, off."),
            click.Option(["--quiet-timing/--no-quiet-timing"], default=None,
                         help="[local] Pause other candidates on a device while one is timed (default on)."),
            click.Option(["--quiet-scope"], type=click.Choice(["host", "device"]), default=None,
                         help="[local] What a timing pauses: every load and build on the host (default with "
                              "one GPU) or only what is bound to the same GPU (default with several)."),
            click.Option(["--pin-cpus/--no-pin-cpus"], default=None,
                         help="[local] Keep one core per GPU free of loads and builds for timing "
                              "(default: on with at least 4 cores)."),
        ],
    ))
