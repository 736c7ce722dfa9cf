"""The evaluation engine: the one object every evaluator runs, whatever carries requests to it.

Every evaluator (``local`` in-process, ``queue`` and ``docker`` workers behind a shared folder, Ray's
device actors) judges a candidate the same way, so a verdict or a runtime never depends on
``--evaluator``. What they share is this object; an evaluator plugin is a *transport* around it.

An ``Engine`` owns:

* the devices, through a ``DeviceProvider``: per device a FIFO ``DeviceGate`` (one timing at a time,
  oldest loaded candidate first; checks in a shared phase of ``check_slots`` that never overlaps a
  timing), a trusted ``ReferenceOracle``, and the ``QuietRegistry`` that pauses neighbours while a
  candidate is timed. ``LocalDevices`` (the default) keeps them in this process; a transport whose
  devices live elsewhere (a Ray actor) passes its own provider;
* CPU slots (``FifoSlots``) for loading, building and JIT warm-up, granted in submission order;
* the content-addressed ``load_inline`` build cache and the per-source Triton/Inductor cache roots;
* pre-started candidate processes (``PrestartPool``), CPU pinning (loads stay off the timing cores)
  and the prewarm policy;
* the evaluation sequence: load -> warm -> wait for the device -> check -> time -> close, on one
  thread per admitted evaluation, each step an ``Evaluation`` (``supervisor``) method.

Public API (stable; a change is announced in a commit starting "engine API:")::

    engine = Engine(EngineConfig(device="cpu", jobs=4), devices=None, error_type=InfrastructureError)
    future = engine.submit(request, fixed_device=None, on_event=None)  # Future[EvalResult]
    engine.abort([future])            # cancel queued, kill running (future raises error_type)
    engine.precompile(requests, jobs=None, on_done=None) -> int   # load + warm only, fills JIT caches
    engine.describe() -> dict         # settings, for run metadata
    engine.stats() -> dict            # gates, slots, quiet timing, build cache, pre-start figures
    engine.close()                    # abort what is in flight, stop every process it started

``submit``: ``fixed_device`` True runs on ``request.device``, False lets the engine choose the least
busy device (ties go to the one with more pre-started processes), None (default) means "fixed when
``request.device`` is one of the engine's devices". ``on_event(event, evaluation)`` hears
``spawned``, ``loaded``, ``check_granted`` (the shared check phase, when the gate has one),
``granted``, ``timing_start``, ``timing_end`` and ``released`` (a transport records its own
timestamps from it; ``granted`` is told after the device is taken and ``released`` before it is
freed, so recorded windows lie inside the real hold). Infrastructure failures end the future with
``error_type(message)`` (``local`` passes the host's ``EvaluatorError``); verdicts, however bad, are
results.

GPU side: torch, triton and the standard library only (no click, no pluggy, no ``pike_harness.api``),
so the same engine runs in a worker container. docs/evaluator.md, "Writing an evaluator".
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pike_harness.worker.records import EvalRequest, EvalResult
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.isolation import UNSAFE_OPTION_HELP

log = logging.getLogger("pikeh.engine")

CACHE_ENV = "PIKEH_CACHE_DIR"
JIT_FLAGS = ("technique:triton", "technique:torch.compile")
PREWARM_CHOICES = ("off", "jit", "all")
OFF_WORDS = ("off", "none", "no", "")


class EngineError(Exception):
    """A setting the engine cannot run with (bad option, no such device, unusable folder): one line."""


# -- settings -------------------------------------------------------------------------------------

@dataclass
class EngineOptions:
    """The engine's tunables. Each field is also a CLI option of the evaluators that run an engine
    (``--jobs``, ``--prestart``, ...: ``local`` declares this class as its ``Config``), so the help
    text lives here. ``None`` means "the default for this host"."""

    jobs: int | None = field(default=None, metadata={
        "min": 1, "help": "CPU slots: candidates loading/compiling at once (checking and timing take turns "
                          "per device). Default: cores - GPUs - 1."})
    max_ready: int | None = field(default=None, metadata={
        "min": 0, "cli": False, "help": "Loaded candidates that may wait for a device. Default: 2 per device, "
                                        "at least 2."})
    prestart: int | None = field(default=None, metadata={
        "min": 0, "help": "Idle pre-started candidate processes per device (torch and CUDA initialised; each "
                          "serves one candidate). Default 2; 0 turns it off."})
    build_cache: str | None = field(default=None, metadata={
        "metavar": "DIR|off", "help": f"Content-addressed load_inline build cache and shared JIT caches. Default: "
                                      f"${CACHE_ENV} or ~/.cache/pike-harness; 'off' builds every candidate "
                                      "from scratch."})
    jit_cache: str | None = field(default=None, metadata={
        "choices": ("shared", "private"), "help": "Triton/Inductor caches: shared between identical candidate "
                                                  "sources (default) or private to each evaluation."})
    prewarm: str | None = field(default=None, metadata={
        "choices": PREWARM_CHOICES, "help": "One call while loading, so JIT compiles run outside the device "
                                            "lock: jit (candidates using Triton or torch.compile; default), "
                                            "all, off."})
    quiet_timing: bool | None = field(default=None, metadata={
        "help": "Pause other candidates on a device while one is timed (default on)."})
    quiet_scope: str | None = field(default=None, metadata={
        "choices": ("host", "device"), "help": "What a timing pauses: every load and build on the host (default "
                                               "with one GPU) or only what is bound to the same GPU (default "
                                               "with several)."})
    check_slots: int | None = field(default=None, metadata={
        "min": 1, "help": "Candidates per device making their checked calls at once, never while one is timed "
                          "(the device lock then covers timing only). Default: 4 per GPU, 1 on the CPU device; "
                          "1 checks and times in one hold of the lock."})
    pin_cpus: bool | None = field(default=None, metadata={
        "help": "Keep one core per GPU free of loads and builds for timing (default: on with at least 4 "
                "cores)."})
    unsafe_no_sandbox: bool | None = field(default=None, metadata={"help": UNSAFE_OPTION_HELP, "flag": True})


@dataclass
class EngineConfig(EngineOptions):
    """Everything an ``Engine`` is built from: where it runs, and its tunables (``EngineOptions``)."""

    device: str = "auto"  # auto, cpu, cuda, cuda:N or cuda:0,1 (ignored when a DeviceProvider is given)
    workdir: Path | None = None  # private files (reference outputs, scratch); None: a temporary folder
    environ: Mapping[str, str] | None = None  # the environment candidates' is scrubbed from (None: os.environ)
    sandbox_optional: bool | None = None  # inside a container (the isolation): sandbox only where it can
    hidden_paths: tuple[str, ...] = ()  # more files/folders candidates must not see (a worker's key file)

    def slots(self, devices: list[str]) -> tuple[int, int]:
        """(CPU slots, loaded candidates that may wait for a device) on ``devices``, defaults resolved."""
        jobs = int(self.jobs or default_cpu_slots(devices))
        max_ready = int(self.max_ready) if self.max_ready is not None else max(2, 2 * len(devices))
        return jobs, max_ready

    @classmethod
    def from_values(cls, values: Mapping[str, Any] | EngineOptions | None = None, **fixed: Any) -> EngineConfig:
        """A config from option values by name (``None`` values keep the default), plus ``fixed``."""
        if isinstance(values, EngineOptions):
            values = {f: getattr(values, f) for f in EngineOptions.__dataclass_fields__}
        known = cls.__dataclass_fields__
        merged = {k: v for k, v in (values or {}).items() if k in known and v is not None}
        merged.update({k: v for k, v in fixed.items() if v is not None})
        return cls(**merged)


def _isolation(config: EngineConfig) -> Any:
    """The sandbox candidates run in (``isolation.choose``); a host that cannot make one is an EngineError."""
    from pike_harness.worker.supervise.isolation import SandboxUnavailable, choose

    home = (config.environ if config.environ is not None else os.environ).get("HOME")
    try:
        return choose(unsafe=bool(config.unsafe_no_sandbox), optional=bool(config.sandbox_optional), home=home,
                      extra_hidden=config.hidden_paths)
    except SandboxUnavailable as exc:
        raise EngineError(str(exc)) from None


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


def cache_root(value: Any) -> Path | None:
    """The build/JIT cache folder for a ``build_cache`` setting (created), or None for 'off'."""
    if value is not None and str(value).strip().lower() in OFF_WORDS:
        return None
    # Absolute: builds run in staging folders under it with their own working directory, so a relative
    # root (--build-cache ./cache, PIKEH_CACHE_DIR=cache) would point nvcc at a path that does not exist.
    root = (Path(value).expanduser() if value else default_cache_root()).absolute()
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise EngineError(f"cannot create the build cache folder {root}: {exc}") from None
    return root


# -- devices --------------------------------------------------------------------------------------

class Gate(Protocol):
    """One device's exclusive lock (``scheduling.DeviceGate``): ``ticket(seq)`` is the lock-like handle
    an ``Evaluation`` waits on (``acquire(timeout=)``, ``release()``, ``cancel()``). A gate with
    ``check_slots`` > 1 and ``session(seq)`` gets the shared check phase; one without checks and times
    in one hold of ``ticket``."""

    def ticket(self, seq: int) -> Any: ...


class Oracle(Protocol):
    """A device's trusted reference (``reference.ReferenceOracle``): hidden seeds from a per-run pool,
    input sets written for the candidate, comparisons against reference outputs it keeps."""

    def hidden_seeds(self, request: EvalRequest) -> list[int]: ...

    def write_inputs(self, request: EvalRequest, seeds: list[int], path: Path, timeout_s: float) -> None: ...

    def compare(self, request: EvalRequest, seeds: list[int], outputs: Path, labels: list[str],
                timeout_s: float) -> dict[str, Any]: ...


class DeviceProvider(Protocol):
    """Where the engine's devices live. ``LocalDevices`` keeps gates, oracles and the quiet registry
    in this process; a transport whose devices are shared with other engines (a Ray device actor)
    provides objects with the same methods that forward to wherever those live."""

    devices: list[str]
    quiet: Any  # a QuietRegistry-like object (add/remove/quiet/paused_seconds), or None: no quiet timing

    def gate(self, device: str) -> Gate: ...

    def oracle(self, device: str) -> Oracle: ...

    def close(self) -> None: ...


class LocalDevices:
    """This process's devices: a FIFO gate, a reference process and one shared quiet registry."""

    def __init__(self, devices: list[str], workdir: Path, *, quiet: Any = None,
                 environ: Mapping[str, str] | None = None, keep_log: bool = True, check_slots: int | None = None):
        from pike_harness.worker.supervise.reference import ReferenceOracle
        from pike_harness.worker.supervise.scheduling import DeviceGate

        self.devices = list(devices)
        self.quiet = quiet
        self.gates = {device: DeviceGate(device, keep_log=keep_log, check_slots=check_slots or default_check_slots(device))
                      for device in self.devices}
        self.oracles = {device: ReferenceOracle(device, Path(workdir), environ=environ) for device in self.devices}
        for oracle in self.oracles.values():  # pay the reference process's start-up now, in the background
            threading.Thread(target=_quietly, args=(oracle.start,), name="pikeh-reference-start",
                             daemon=True).start()

    def gate(self, device: str) -> Any:
        return self.gates[device]

    def oracle(self, device: str) -> Any:
        return self.oracles[device]

    def close(self) -> None:
        for oracle in self.oracles.values():
            with contextlib.suppress(Exception):
                oracle.close()


def default_check_slots(device: str) -> int:
    """Four on a GPU: the checks of four candidates (checked calls, handing their outputs over, the
    comparison) overlap while the device is not timing. One on the CPU device, whose checks would
    compete for the cores."""
    return 4 if device.startswith("cuda") else 1


def _quietly(function: Callable[..., Any], *args: Any) -> None:
    """Run a head start in the background; if it fails, the first real use reports the error."""
    with contextlib.suppress(Exception):
        function(*args)


# -- bookkeeping ----------------------------------------------------------------------------------

@dataclass
class JobTrace:
    """When one evaluation passed each point (time.monotonic seconds); for tests and benchmarks."""

    seq: int
    task: str
    submitted: float
    device: str | None = None
    load_start: float | None = None
    loaded: float | None = None
    check_granted: float | None = None  # the shared check phase (gates with check_slots > 1)
    checked: float | None = None
    granted: float | None = None  # the device held alone: timing (and checking, with one check slot)
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
    on_event: Callable[[str, Any], None] | None = None
    evaluation: Any = None
    aborted: bool = False


# -- the engine -----------------------------------------------------------------------------------

class Engine:
    """Owns devices, CPU slots, caches and pre-started processes, and runs the evaluation sequence.

    Admission is bounded by ``jobs + max_ready`` threads, so at most ``max_ready`` loaded candidates
    (each holding a process and, on a GPU, a CUDA context) queue for the devices; further submissions
    wait in submission order. Thread-safe.
    """

    def __init__(self, config: EngineConfig | None = None, *, devices: DeviceProvider | None = None,
                 error_type: Callable[[str], BaseException] = InfrastructureError):
        from pike_harness.worker.supervise.buildcache import BuildCache
        from pike_harness.worker.supervise.devices import resolve_devices
        from pike_harness.worker.supervise.exchange import sweep_exchange_folders
        from pike_harness.worker.supervise.prestart import PrestartPool
        from pike_harness.worker.supervise.sandbox import sweep_orphans
        from pike_harness.worker.supervise.scheduling import FifoSlots, QuietRegistry, cpu_partition
        from pike_harness.worker.supervise.supervisor import WorkerSettings

        config = config or EngineConfig()
        self.config = config
        self.error_type = error_type
        if devices is not None:
            names = list(devices.devices)
        else:
            try:
                names = resolve_devices(config.device)
            except ValueError as exc:
                raise EngineError(str(exc)) from None
        self.devices = names
        swept = sweep_orphans()
        if swept:
            log.warning("killed %d process(es) left by an earlier harness that was killed "
                        "(candidates it had paused for quiet timing never resume by themselves)", swept)
        sweep_exchange_folders()  # shared memory a killed harness left behind

        self.isolation = _isolation(config)
        self.jobs, self.max_ready = config.slots(names)
        self.prestart_per_device = int(config.prestart) if config.prestart is not None else 2
        self.prewarm = str(config.prewarm or "jit")
        if self.jobs < 1 or self.max_ready < 0 or self.prestart_per_device < 0:
            raise EngineError("--jobs must be at least 1, --prestart and max_ready at least 0")
        if self.prewarm not in PREWARM_CHOICES:
            raise EngineError(f"--prewarm must be one of {', '.join(PREWARM_CHOICES)}")
        scope = config.quiet_scope or ("host" if len(names) <= 1 else "device")
        if scope not in ("host", "device"):
            raise EngineError("--quiet-scope must be host or device")
        jit_mode = str(config.jit_cache or "shared")
        if jit_mode not in ("shared", "private"):
            raise EngineError("--jit-cache must be shared or private")

        self._own_workdir = config.workdir is None
        self.workdir = Path(config.workdir or tempfile.mkdtemp(prefix="pikeh-eval-")).absolute()
        try:
            self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise EngineError(f"cannot create the work folder {self.workdir}: {exc}") from None
        # Candidates and builders never see the work folder (reference outputs, others' scratch).
        self.isolation = replace(self.isolation, hidden=(*self.isolation.hidden, str(self.workdir)))
        self.cache_root = cache_root(config.build_cache)
        self.jit_mode = jit_mode if self.cache_root is not None else "private"

        if devices is not None:
            self.quiet = devices.quiet
        else:
            quiet_on = config.quiet_timing is None or config.quiet_timing
            self.quiet = QuietRegistry(host_wide=scope == "host") if quiet_on else None
        self.quiet_scope = ("host" if getattr(self.quiet, "host_wide", False) else "device") if self.quiet else None
        pin = config.pin_cpus is None or config.pin_cpus
        self.load_cpus, self.timing_cpus = cpu_partition(names) if pin else (None, None)
        self._own_cpus: set[int] | None = None
        if self.load_cpus:  # the harness's own threads (policing, comparing) stay off the timing cores too
            from pike_harness.worker.supervise.spawn import set_affinity

            self._own_cpus = set(os.sched_getaffinity(0))
            set_affinity(os.getpid(), self.load_cpus)
        self.all_cpus = (self.load_cpus | self.timing_cpus) if self.load_cpus and self.timing_cpus else None

        self.build_cache = (BuildCache(self.cache_root / "build", cpus=self.load_cpus, registry=self.quiet,
                                       isolation=self.isolation) if self.cache_root is not None else None)
        self.settings = WorkerSettings(
            workdir=self.workdir, build_cache=self.build_cache, cpus=self.load_cpus, environ=config.environ,
            isolation=self.isolation,
            jit_cache_root=(self.cache_root / "jit") if self.jit_mode == "shared" and self.cache_root else None)
        self.prestart = (PrestartPool(self.settings, names, self.prestart_per_device, cpus=self.load_cpus,
                                      registry=self.quiet) if self.prestart_per_device > 0 else None)
        self.settings.prestart = self.prestart
        if config.check_slots is not None and int(config.check_slots) < 1:
            raise EngineError("--check-slots must be at least 1")
        self.provider: DeviceProvider = devices or LocalDevices(names, self.workdir / "reference", quiet=self.quiet,
                                                                environ=config.environ, check_slots=config.check_slots)
        if self.build_cache is not None:  # the toolchain probe, which the first build would wait for
            threading.Thread(target=_quietly, args=(self.build_cache.prefetch, names), name="pikeh-probe",
                             daemon=True).start()

        self.slots = FifoSlots(self.jobs)
        self._pool = ThreadPoolExecutor(max_workers=self.jobs + self.max_ready, thread_name_prefix="pikeh-engine")
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._assigned = {device: 0 for device in names}
        self._live: set[Any] = set()
        self._jobs: dict[Future, _Job] = {}
        self._closing = False
        self._closed = False
        self.traces: list[JobTrace] = []
        self.first_submit: float | None = None
        self.last_done: float | None = None

    @property
    def capacity(self) -> int:
        """Evaluations the engine works on at once (loading or waiting for a device); more queue."""
        return self.jobs + self.max_ready

    @property
    def gates(self) -> dict[str, Any]:
        return {device: self.provider.gate(device) for device in self.devices}

    # -- submission ------------------------------------------------------------------------------
    def submit(self, request: EvalRequest, *, fixed_device: bool | None = None,
               on_event: Callable[[str, Any], None] | None = None) -> Future[EvalResult]:
        """Queue one evaluation; see the module docstring for ``fixed_device`` and ``on_event``."""
        if self._closing:
            raise self.error_type("this evaluator is closed")
        if fixed_device is None:
            fixed_device = request.device in self.devices
        elif fixed_device and request.device not in self.devices:
            raise self.error_type(f"device {request.device} is not one of this engine's ({', '.join(self.devices)})")
        seq = next(self._seq)
        now = time.monotonic()
        trace = JobTrace(seq=seq, task=request.task, submitted=now)
        future: Future[EvalResult] = Future()
        job = _Job(seq=seq, request=request, fixed_device=fixed_device, future=future, trace=trace,
                   on_event=on_event)
        with self._lock:
            if self.first_submit is None:
                self.first_submit = now
            self.traces.append(trace)
            self._jobs[future] = job
        future.add_done_callback(self._forget)
        self._pool.submit(self._run, job)
        return future

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

    def _pick_device(self, job: _Job) -> str:
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

    # -- the evaluation sequence -----------------------------------------------------------------
    def _run(self, job: _Job) -> None:
        """load -> warm (CPU slot) -> wait for the device -> check and time (gate) -> close."""
        from pike_harness.worker.supervise.supervisor import Evaluation

        if not job.future.set_running_or_notify_cancel():
            return
        trace = job.trace
        device: str | None = None
        evaluation = None
        quiet_token: list[Any] = [None]
        slot_held = False
        try:
            self.slots.acquire(job.seq)
            slot_held = True
            if self._closing or job.aborted:
                raise InfrastructureError("the evaluation was aborted")
            device = self._pick_device(job)
            trace.device, trace.load_start = device, time.monotonic()
            evaluation = Evaluation(replace(job.request, device=device), self.provider.oracle(device), self.settings)
            with self._lock:
                self._live.add(evaluation)
                job.evaluation = evaluation
                if job.aborted or self._closing:
                    evaluation.abort()
            evaluation.listener = self._listener(job, device, quiet_token)
            result = evaluation.load()
            trace.prestarted = bool(evaluation.environment.get("prestarted"))
            if result is None and self.wants_warm(evaluation):
                trace.warmed = True
                result = evaluation.warm()
            trace.loaded = time.monotonic()
            self._tell(job, "loaded", evaluation)
            self.slots.release()
            slot_held = False
            if result is None:
                result = self._on_device(job, evaluation, device, quiet_token)
            trace.category = result.category
            evaluation.close()
            trace.done = self.last_done = time.monotonic()
            job.future.set_result(result)
        except InfrastructureError as exc:
            trace.category = "infrastructure_error"
            job.future.set_exception(self.error_type(str(exc)))
        except BaseException as exc:  # a bug: the caller sees it rather than a future that never ends
            trace.category = "bug"
            job.future.set_exception(exc)
        finally:
            if trace.done is None:
                trace.done = time.monotonic()
            if slot_held:
                self.slots.release()
            if quiet_token[0] is not None and self.quiet is not None:
                self.quiet.remove(quiet_token[0])
            if evaluation is not None:
                evaluation.close()
                with self._lock:
                    self._live.discard(evaluation)
            if device is not None:
                with self._lock:
                    self._assigned[device] -= 1

    def _listener(self, job: _Job, device: str, quiet_token: list[Any]) -> Callable[[str, Any], None]:
        """The Evaluation's hook: register the candidate for quiet timing, quiet its neighbours while
        it is timed, note the times, and pass each event on to the transport's ``on_event``."""
        timing_quiet: list[Any] = []
        quiet = self.quiet

        def listener(event: str, ev: Any) -> None:
            if event == "spawned" and quiet is not None:
                token = quiet_token[0] = quiet.add(ev.popen.pid, ev.marker, device)
                ev.paused_s = lambda: quiet.paused_seconds(token)
            elif event == "timing_start":
                job.trace.timing_start = time.monotonic()
                if quiet is not None:
                    context = quiet.quiet(device, ev.session)
                    context.__enter__()
                    timing_quiet.append(context)
            elif event == "timing_end":
                job.trace.timing_end = time.monotonic()
                while timing_quiet:
                    timing_quiet.pop().__exit__(None, None, None)
            self._tell(job, event, ev)

        return listener

    @staticmethod
    def _tell(job: _Job, event: str, evaluation: Any) -> None:
        if job.on_event is not None:
            job.on_event(event, evaluation)

    def _on_device(self, job: _Job, evaluation: Any, device: str, quiet_token: list[Any]) -> EvalResult:
        """Wait for the device (policing the idle candidate), then correctness and timing holding it."""
        gate = self.provider.gate(device)
        if getattr(gate, "check_slots", 1) > 1 and hasattr(gate, "session"):
            return self._in_phases(job, evaluation, gate.session(job.seq), quiet_token)
        ticket = gate.ticket(job.seq)
        try:
            early = self._hold(job, evaluation, ticket, quiet_token)
        except BaseException:
            ticket.cancel()
            ticket.release()  # held, if the failure came after the grant
            raise
        if early is not None:
            ticket.cancel()
            return early
        try:
            return evaluation.finish()
        finally:
            # Stamped and told before the lock opens: a window a transport records from the events
            # then lies inside the real hold, so two recorded windows on one device never overlap.
            job.trace.released = time.monotonic()
            try:
                self._tell(job, "released", evaluation)
            finally:
                ticket.release()

    def _in_phases(self, job: _Job, evaluation: Any, session: Any, quiet_token: list[Any]) -> EvalResult:
        """The checked calls in the device's shared check phase (several candidates at once, never
        while one is timed), then timing holding the device alone. A candidate that runs out of device
        memory while other candidates' models are resident runs that stage again with none resident."""
        from pike_harness.worker.supervise.supervisor import RetryAlone

        trace = job.trace
        try:
            early = evaluation.wait_for(session.phase("check"))
            if early is not None:
                return early
            trace.check_granted = time.monotonic()
            self._tell(job, "check_granted", evaluation)
            alone = False
            try:
                result = evaluation.check(shared=True)
            except RetryAlone:
                trace.checked = time.monotonic()
                early = self._hold(job, evaluation, session.phase("alone"), quiet_token)
                if early is not None:
                    return early
                alone, result = True, evaluation.check()
            trace.checked = trace.checked or time.monotonic()
            if result is not None:
                return result
            if not alone:
                early = self._hold(job, evaluation, session.phase("time"), quiet_token)
                if early is not None:
                    return early
                try:
                    return evaluation.time(shared=session.others_resident())
                except RetryAlone:
                    early = self._hold(job, evaluation, session.phase("alone"), quiet_token)
                    if early is not None:
                        return early
            return evaluation.time()
        finally:
            try:
                if trace.granted is not None:  # before the session ends, as in _on_device
                    trace.released = time.monotonic()
                    self._tell(job, "released", evaluation)
            finally:
                session.end()

    def _hold(self, job: _Job, evaluation: Any, phase: Any, quiet_token: list[Any]) -> EvalResult | None:
        """Wait for a lock (a gate ticket, or a session phase) that holds the device alone; a result means
        the candidate broke a limit meanwhile."""
        from pike_harness.worker.supervise.spawn import set_session_affinity

        early = evaluation.wait_for(phase)
        if early is not None:
            return early
        if job.trace.granted is None:
            job.trace.granted = time.monotonic()
        if self.quiet is not None and quiet_token[0] is not None:
            self.quiet.remove(quiet_token[0])  # the candidate holding the device is never paused
            quiet_token[0] = None
        if self.all_cpus and evaluation.session is not None:
            set_session_affinity(evaluation.session, self.all_cpus)
        self._tell(job, "granted", evaluation)
        return None

    def wants_warm(self, evaluation: Any) -> bool:
        """The prewarm policy: which candidates get one call while loading (JIT compiles off the gate)."""
        from pike_harness.worker.inside.baseline_modes import JIT_MODES

        if self.prewarm == "all":
            return True
        if self.prewarm == "jit":
            return (any(flag in evaluation.flags for flag in JIT_FLAGS)
                    or evaluation.request.baseline_mode in JIT_MODES)
        return False

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
            evaluation = Evaluation(request, self.provider.oracle(request.device), self.settings)
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
                               "prestart_per_device": self.prestart_per_device, "prewarm": self.prewarm,
                               "quiet_timing": self.quiet is not None, "quiet_scope": self.quiet_scope,
                               "check_slots": {d: getattr(self.provider.gate(d), "check_slots", 1)
                                               for d in self.devices},
                               "timing_cpus": sorted(self.timing_cpus) if self.timing_cpus else None,
                               "build_cache": str(self.cache_root / "build") if self.build_cache else None,
                               "jit_cache": self.jit_mode},
                "isolation": self.isolation.label,
                "host": host_info()}

    def stats(self) -> dict[str, Any]:
        """Device busy fractions, queueing, quiet-timing, build-cache and pre-start figures since the
        first submission (benchmarks and the cross-evaluator acceptance test read these)."""
        end = self.last_done or time.monotonic()
        wall = (end - self.first_submit) if self.first_submit is not None else 0.0
        devices = {}
        for name in self.devices:
            gate_stats = getattr(self.provider.gate(name), "stats", None)
            figures = gate_stats.to_dict() if gate_stats is not None else {}
            figures["busy_fraction"] = figures.get("busy_s", 0.0) / wall if wall > 0 else 0.0
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
        if self.prestart is not None:
            out["prestart"] = {"served": self.prestart.served, "missed": self.prestart.missed}
        return out

    def close(self) -> None:
        """Abort evaluations in flight (their processes are killed), cancel queued ones, stop the
        pre-started and reference processes, and give back the cores and folders it took. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._closing = True
            live = list(self._live)
            for job in self._jobs.values():
                job.aborted = True
        for evaluation in live:
            evaluation.abort()
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            never_started = [job.future for job in self._jobs.values()]
        for future in never_started:  # queued behind the pool's threads: nobody else would end them
            future.cancel()
        if self.prestart is not None:
            self.prestart.close()
        self.provider.close()
        if self._own_cpus:
            from pike_harness.worker.supervise.spawn import set_affinity

            set_affinity(os.getpid(), self._own_cpus)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
