"""The engine's settings, and ``resolve``: every default filled and every value checked, with no side effect.

Every transport that runs an engine (``local`` in this process, the ``queue``/``docker`` workers, a Ray
device actor) builds it from an ``EngineConfig``; ``resolve`` turns that into a ``Plan`` in one place,
so no transport re-derives a default (the number of CPU slots, the quiet scope, the check slots, the
pinned cores, the cache folder). It only reads the host (its cores, the environment): a bad value is an
``EngineError`` before any process is started, any core re-pinned or any folder created.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pike_harness.worker.supervise.isolation import UNSAFE_OPTION_HELP
from pike_harness.worker.supervise.noise import NoiseLimits

CACHE_ENV = "PIKEH_CACHE_DIR"
PREWARM_CHOICES = ("off", "jit", "all")
QUIET_SCOPES = ("host", "device")
JIT_CACHE_MODES = ("shared", "private")
OFF_WORDS = ("off", "none", "no", "")
QUIET_MODES = ("stop", "cores")
PAIRED_CORES = ("rotate", "free")  # engine.paired: where each pair of blocks runs
CPU_ORDERS = ("longest-first", "submission")  # engine.work_order's policies
# Measured (benchmarks/bench_admission.py, H100 host with 16 cores, 2026-11-28): 16 processes starting at
# once took 3.0 s each against 1.7 s alone, 4.3 starts/s against 1.65 at 4 at once: starts do not storm
# at the core count, so the limit is the core count (and never more than --jobs).
DEFAULT_START_SLOTS = os.cpu_count() or 4


class EngineError(Exception):
    """A setting the engine cannot run with (bad option, no such device, unusable folder): one line."""


@dataclass
class EngineOptions:
    """The engine's tunables. Each field is also a CLI option of the evaluators that run an engine
    (``--jobs``, ``--prestart``, ...: ``local`` declares this class as its ``Config``), so the help
    text lives here. ``None`` means "the default for this host" (``resolve`` fills it)."""

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
                                      f"${CACHE_ENV} or ~/.cache/pike-harness, off where candidates run without "
                                      "the sandbox (naming a folder there needs --unsafe-no-sandbox); 'off' "
                                      "builds every candidate from scratch."})
    jit_cache: str | None = field(default=None, metadata={
        "choices": JIT_CACHE_MODES, "help": "Triton/Inductor caches: shared between identical candidate "
                                            "sources (default; private without the sandbox) or private to each "
                                            "evaluation."})
    prewarm: str | None = field(default=None, metadata={
        "choices": PREWARM_CHOICES, "help": "One call while loading, so JIT compiles run outside the device "
                                            "lock: jit (candidates using Triton or torch.compile; default), "
                                            "all, off."})
    quiet_timing: bool | None = field(default=None, metadata={
        "help": "Pause other candidates on a device while one is timed (default on)."})
    quiet_mode: str | None = field(default=None, metadata={
        "choices": QUIET_MODES, "help": "How a timing is kept quiet: stop every other process we started "
                                        "(default), or give the timed process cores that nothing else of "
                                        "ours may use and stop nothing (needs --pin-cpus)."})
    quiet_scope: str | None = field(default=None, metadata={
        "choices": QUIET_SCOPES, "help": "What a timing pauses: every load and build on the host (default "
                                         "with one GPU) or only what is bound to the same GPU (default "
                                         "with several)."})
    check_slots: int | None = field(default=None, metadata={
        "min": 1, "help": "Candidates per device making their checked calls at once, never while one is timed "
                          "(the device lock then covers timing only). Default: 4 per GPU, 1 on the CPU device; "
                          "1 checks and times in one hold of the lock."})
    pin_cpus: bool | None = field(default=None, metadata={
        "help": "Keep one core per GPU free of loads and builds for timing (default: on with at least 4 "
                "cores)."})
    noise_canary_tolerance: float | None = field(default=None, metadata={
        "min": 0.0, "help": "A timing whose noise canary reads more than this fraction slower than the "
                            "device's recent baseline is noisy: redone, then flagged noisy_timing. "
                            "Default 0.5."})
    noise_max_steal: float | None = field(default=None, metadata={
        "min": 0.0, "max": 1.0, "help": "A timing during which the hypervisor stole more than this share of "
                                        "the host's CPU time (/proc/stat) is noisy. Default 0.05."})
    noise_redo: int | None = field(default=None, metadata={
        "min": 0, "help": "Noisy timings thrown away and taken again before the last one is kept and "
                          "flagged. Default 2; 0 never redoes (only flags)."})
    cpu_order: str | None = field(default=None, metadata={
        "choices": CPU_ORDERS, "help": "Order CPU work starts in: longest-first (load_inline builds, then "
                                       "Triton/torch.compile warm-ups, then the rest, each in submission "
                                       "order; default) or submission."})
    build_slots: int | None = field(default=None, metadata={
        "min": 1, "help": "CPU slots candidates with a load_inline build may hold at once while others wait, "
                          "so those load beside the builds. Default: 3/4 of --jobs, at least 1."})
    long_slots: int | None = field(default=None, metadata={
        "min": 0, "help": "CPU slots (and threads) of their own for candidates with long CPU work (a load_inline "
                          "build, a Triton or torch.compile warm-up), beside --jobs: they start at once instead "
                          "of behind quick loads that wait for the device. Default: twice --jobs with a GPU, 0 "
                          "(they share --jobs) on the CPU device."})
    start_slots: int | None = field(default=None, metadata={
        "min": 1, "help": "Candidate processes importing torch and initialising the device at once "
                          "(pre-starts included). Default: the number of cores, at most --jobs."})
    fresh_inputs: bool | None = field(default=None, metadata={
        "help": "Make a few uncounted calls on input sets the candidate was never shown among its timed calls, "
                "to catch a cache keyed on the input's content (rejected/content_cache) and answers right only "
                "on inputs seen (incorrect/fresh_input); default on. Off: PIKE's loop."})
    paired_cores: str | None = field(default=None, metadata={
        "choices": PAIRED_CORES, "help": "Where a paired re-timing's blocks run: rotate (both sides of a pair on "
                                         "one core, the next pair on the next core; default) or free (where the "
                                         "scheduler puts them)."})
    unsafe_no_sandbox: bool | None = field(default=None, metadata={"help": UNSAFE_OPTION_HELP, "flag": True})


@dataclass
class EngineConfig(EngineOptions):
    """Everything an ``Engine`` is built from: where it runs, and its tunables (``EngineOptions``)."""

    device: str = "auto"  # auto, cpu, cuda, cuda:N or cuda:0,1 (ignored when a DeviceProvider is given)
    workdir: Path | None = None  # private files (reference outputs, scratch); None: a temporary folder
    environ: Mapping[str, str] | None = None  # the environment candidates' is scrubbed from (None: os.environ)
    sandbox_optional: bool | None = None  # inside a container (the isolation): sandbox only where it can
    hidden_paths: tuple[str, ...] = ()  # more files/folders candidates must not see (a worker's key file)

    @classmethod
    def from_values(cls, values: Mapping[str, Any] | EngineOptions | None = None, **fixed: Any) -> EngineConfig:
        """A config from option values by name (``None`` values keep the default), plus ``fixed``."""
        if isinstance(values, EngineOptions):
            values = {f: getattr(values, f) for f in EngineOptions.__dataclass_fields__}
        known = cls.__dataclass_fields__
        merged = {k: v for k, v in (values or {}).items() if k in known and v is not None}
        merged.update({k: v for k, v in fixed.items() if v is not None})
        return cls(**merged)


@dataclass(frozen=True)
class HostShare:
    """How much of the host an engine may take, where it shares the host with other engines (a Ray
    node runs one engine per device): ``cpus`` cores at most for its CPU slots, and ``engines`` the
    number of engines on the host. The default, one engine alone, is every other transport's case."""

    cpus: int | None = None
    engines: int = 1

    @property
    def alone(self) -> bool:
        return self.engines <= 1


@dataclass(frozen=True)
class Plan:
    """An engine's settings with every default filled and checked: what ``Engine`` starts from, and
    what ``describe()`` reports."""

    devices: tuple[str, ...]
    jobs: int
    max_ready: int
    prestart_per_device: int
    prewarm: str
    quiet_timing: bool
    quiet_scope: str  # host or device (what a timing pauses, when quiet_timing is on)
    quiet_mode: str  # stop (pause the others) or cores (the timed process alone on its own cores)
    cpu_order: str  # longest-first or submission (engine.work_order)
    start_slots: int  # process starts at once
    build_slots: int  # CPU slots build jobs may hold while others wait (engine.work_order.WorkQueue)
    long_slots: int  # CPU slots and threads for long jobs only (builds, JIT warm-ups); 0: they share jobs
    check_slots: Mapping[str, int]
    load_cpus: frozenset[int] | None  # cores for loads and builds (None: not pinned)
    timing_cpus: frozenset[int] | None  # cores kept free for timing
    cache_root: Path | None  # the build/JIT cache folder (created when the engine starts); None: off
    jit_mode: str  # shared or private
    config: EngineConfig  # what it was resolved from (workdir, environment, isolation inputs)
    noise: NoiseLimits = field(default_factory=NoiseLimits)  # when a timing is noisy, how often it is redone
    paired_cores: str = "rotate"  # where a paired re-timing's blocks run (engine.paired)
    fresh_inputs: bool = True  # fresh calls in the timed loop (EvalRequest.fresh_input_sets of them)
    # The setting that asked for shared caches by name (``cache_request``), None where they are the
    # default; and why the caches are as they are, where the isolation changed them (``for_isolation``).
    cache_asked: str | None = None
    cache_note: str | None = None

    @property
    def capacity(self) -> int:
        """Evaluations worked on at once (loading or waiting for a device); more queue."""
        return self.jobs + self.max_ready


def resolve(config: EngineConfig, devices: list[str], share: HostShare | None = None) -> Plan:
    """The ``Plan`` for ``config`` on ``devices``; an ``EngineError`` names the first bad setting.
    Reads the host's cores and environment, changes nothing."""
    from pike_harness.worker.supervise.scheduling import cpu_partition

    share = share or HostShare()
    if not devices:
        raise EngineError("no device to evaluate on")
    jobs = config.jobs
    if jobs is None:
        own = default_cpu_slots(devices)
        jobs = max(1, min(own, int(share.cpus))) if share.cpus else own
    max_ready = config.max_ready if config.max_ready is not None else max(2, 2 * len(devices))
    prestart = config.prestart if config.prestart is not None else 2
    if int(jobs) < 1 or int(max_ready) < 0 or int(prestart) < 0:
        raise EngineError("--jobs must be at least 1, --prestart and max_ready at least 0")
    prewarm = str(config.prewarm or "jit")
    if prewarm not in PREWARM_CHOICES:
        raise EngineError(f"--prewarm must be one of {', '.join(PREWARM_CHOICES)}")
    # Host-wide quiet with one device: nothing else on the host may disturb its timing. A Ray actor
    # sharing its node with other devices' engines pauses only its own device's candidates.
    scope = config.quiet_scope or ("host" if len(devices) <= 1 and share.alone else "device")
    if scope not in QUIET_SCOPES:
        raise EngineError("--quiet-scope must be host or device")
    quiet_mode = str(config.quiet_mode or "stop")
    if quiet_mode not in QUIET_MODES:
        raise EngineError(f"--quiet-mode must be one of {', '.join(QUIET_MODES)}")
    paired_cores = str(config.paired_cores or PAIRED_CORES[0])
    if paired_cores not in PAIRED_CORES:
        raise EngineError(f"--paired-cores must be one of {', '.join(PAIRED_CORES)}")
    cpu_order = str(config.cpu_order or CPU_ORDERS[0])
    if cpu_order not in CPU_ORDERS:
        raise EngineError(f"--cpu-order must be one of {', '.join(CPU_ORDERS)}")
    if config.start_slots is not None and int(config.start_slots) < 1:
        raise EngineError("--start-slots must be at least 1")
    start_slots = int(config.start_slots) if config.start_slots is not None else min(DEFAULT_START_SLOTS, int(jobs))
    if config.build_slots is not None and int(config.build_slots) < 1:
        raise EngineError("--build-slots must be at least 1")
    build_slots = int(config.build_slots) if config.build_slots is not None else max(1, 3 * int(jobs) // 4)
    if config.long_slots is not None and int(config.long_slots) < 0:
        raise EngineError("--long-slots must be at least 0")
    long_slots = int(config.long_slots) if config.long_slots is not None else default_long_slots(devices, int(jobs))
    jit_mode = str(config.jit_cache or "shared")
    if jit_mode not in JIT_CACHE_MODES:
        raise EngineError("--jit-cache must be shared or private")
    if config.check_slots is not None and int(config.check_slots) < 1:
        raise EngineError("--check-slots must be at least 1")
    check_slots = {d: int(config.check_slots) if config.check_slots is not None else default_check_slots(d)
                   for d in devices}
    # Engines sharing a host would each keep "their" timing core: pinning is for an engine alone.
    pin = (config.pin_cpus is None or bool(config.pin_cpus)) and share.alone
    load_cpus, timing_cpus = cpu_partition(list(devices)) if pin else (None, None)
    if quiet_mode == "cores" and timing_cpus is None:
        raise EngineError("--quiet-mode cores needs cores kept for timing: a GPU, --pin-cpus and at least 4 cores")
    root = cache_path(config.build_cache)
    return Plan(devices=tuple(devices), jobs=int(jobs), max_ready=int(max_ready), prestart_per_device=int(prestart),
                prewarm=prewarm, quiet_timing=config.quiet_timing is None or bool(config.quiet_timing),
                quiet_scope=scope, quiet_mode=quiet_mode, cpu_order=cpu_order, start_slots=start_slots,
                build_slots=build_slots, long_slots=long_slots, check_slots=check_slots, noise=noise_limits(config),
                load_cpus=frozenset(load_cpus) if load_cpus else None,
                timing_cpus=frozenset(timing_cpus) if timing_cpus else None,
                cache_root=root, jit_mode=jit_mode if root is not None else "private", config=config,
                paired_cores=paired_cores, fresh_inputs=config.fresh_inputs is None or bool(config.fresh_inputs),
                cache_asked=cache_request(config) if root is not None else None)


def cache_request(config: EngineOptions) -> str | None:
    """The setting that asks for shared caches by name, in the user's words (``--build-cache DIR``,
    ``$PIKEH_CACHE_DIR``, ``--jit-cache shared``), or None where they would only be the default."""
    if config.build_cache is not None and str(config.build_cache).strip().lower() not in OFF_WORDS:
        return f"--build-cache {config.build_cache}"
    if config.build_cache is None and os.environ.get(CACHE_ENV):
        return f"${CACHE_ENV}"
    if config.jit_cache == "shared":
        return "--jit-cache shared"
    return None


def for_isolation(plan: Plan, isolation: Any) -> Plan:
    """``plan`` with the caches candidates isolated as ``isolation`` (``isolation.Isolation``) may share.

    The shared build cache and JIT caches are safe only where candidates cannot reach them: the
    bubblewrap sandbox hides them (``isolation.active``). Without it (a container without user
    namespaces, ``--unsafe-no-sandbox``) a candidate runs as the supervisor's user and could plant a
    folder where a build's lock goes (later builds fail), a built library with its ``meta.json`` (later
    candidates load it) or another source's Triton/Inductor entry (its kernels and FX graphs are loaded
    by later evaluations): there they are off by default (``cache_note`` says why); a setting that
    asks for them by name is an ``EngineError``, unless ``--unsafe-no-sandbox`` says the candidates
    are trusted. Pure: reads nothing, creates nothing."""
    if plan.cache_root is None or isolation.active:
        return plan
    label = isolation.label
    if plan.cache_asked is None:
        return replace(plan, cache_root=None, jit_mode="private",
                       cache_note=f"no shared build or JIT cache: candidates run without the sandbox ({label}), "
                                  "so one could plant builds or JIT caches that later candidates load")
    if not plan.config.unsafe_no_sandbox:
        raise EngineError(f"{plan.cache_asked} asks for a shared build/JIT cache, but candidates run without the "
                          f"sandbox here ({label}) and could plant builds or JIT caches that later candidates "
                          "load: drop it (or use --build-cache off), or pass --unsafe-no-sandbox if you trust "
                          "the candidates")
    return replace(plan, cache_note=f"shared build and JIT caches with unsandboxed candidates ({plan.cache_asked}, "
                                    "--unsafe-no-sandbox): a candidate can plant what later ones load")


def noise_limits(config: EngineOptions) -> NoiseLimits:
    """The noise canary's limits: the defaults, with the options that are set."""
    default = NoiseLimits()
    tolerance = default.canary_tolerance if config.noise_canary_tolerance is None else config.noise_canary_tolerance
    steal = default.max_steal if config.noise_max_steal is None else config.noise_max_steal
    redo = default.redo if config.noise_redo is None else config.noise_redo
    if float(tolerance) < 0 or not 0 <= float(steal) <= 1 or int(redo) < 0:
        raise EngineError("--noise-canary-tolerance and --noise-redo must be at least 0, "
                          "--noise-max-steal between 0 and 1")
    return NoiseLimits(canary_tolerance=float(tolerance), max_steal=float(steal), redo=int(redo))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_cpu_slots(devices: list[str]) -> int:
    """Cores minus one per GPU (its timing) minus one (the harness and the reference processes)."""
    gpus = sum(1 for d in devices if d.startswith("cuda"))
    return max(1, usable_cores() - gpus - 1)


def default_long_slots(devices: list[str], jobs: int) -> int:
    """Twice ``jobs`` with a GPU, so a batch's builds and JIT warm-ups all start at once: with fewer,
    the last of them waited for a slot and ended the batch. On an H200 host (16 cores, the 60-set of 29 long
    candidates, 2026-11-29) ``jobs`` (14) left level3-pike 8's Triton autotuning waiting 245 s for a
    slot and the batch ended at 434 s; twice that (28) started every long candidate at once and ended
    at 375 s in the same sitting (371 s with 30 on another machine), the CPU 68 % busy between
    timings; the 14-slot run came first, and a first run on a fresh machine pays about 40 s by itself,
    so part of that gap is order. Bounded, so a larger batch does not start every long candidate's compiler at once.
    None on the CPU device, where the cores are what is measured and already all in use."""
    return 2 * jobs if any(d.startswith("cuda") for d in devices) else 0


def default_check_slots(device: str) -> int:
    """Four on a GPU: the checks of four candidates (checked calls, handing their outputs over, the
    comparison) overlap while the device is not timing. One on the CPU device, whose checks would
    compete for the cores."""
    return 4 if device.startswith("cuda") else 1


def default_cache_root() -> Path:
    """Where builds and JIT caches persist between runs: $PIKEH_CACHE_DIR, else the user's cache folder."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pike-harness"


def cache_path(value: Any) -> Path | None:
    """The build/JIT cache folder a ``build_cache`` setting names (not created), or None for 'off'."""
    if value is not None and str(value).strip().lower() in OFF_WORDS:
        return None
    # Absolute: builds run in staging folders under it with their own working directory, so a relative
    # root (--build-cache ./cache, PIKEH_CACHE_DIR=cache) would point nvcc at a path that does not exist.
    return (Path(value).expanduser() if value else default_cache_root()).absolute()


def cache_root(value: Any) -> Path | None:
    """The build/JIT cache folder for a ``build_cache`` setting, created; None for 'off'."""
    root = cache_path(value)
    if root is not None:
        make_private_folder(root, "the build cache folder")
    return root


def make_private_folder(path: Path, what: str) -> None:
    """Create ``path`` (owner-only); a folder that cannot be made is an ``EngineError`` naming ``what``."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise EngineError(f"cannot create {what} {path}: {exc}") from None
