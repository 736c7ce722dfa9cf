"""Evaluate one EvalRequest into one EvalResult: the building block of the evaluation engine
(``engine.Engine``), which every evaluator (local, queue, docker, Ray) runs. It runs in a trusted
process, starts the candidate's sandboxed process, drives its stages, polices it, has the reference
process compare its outputs with the reference's and writes the verdict.

The work is split in two phases so the engine can place them: ``Evaluation.load()`` (static
checks, process start, import and ``load_inline`` builds: CPU only, run in parallel) and
``Evaluation.finish()`` (correctness and timing: hold the device's exclusive lock around it). In
between, ``wait_for(lock)`` keeps policing the idle candidate while it waits for the device. The
engine strings the phases together (``Engine._run``). Optional pieces it plugs in through
``WorkerSettings``: pre-started candidate processes (``prestart.PrestartPool``), the ``load_inline``
build cache (``buildcache.BuildCache``), shared per-source Triton/Inductor caches (``jit_cache_root``),
and ``Evaluation.warm()`` (one call in phase 1, so JIT compiles run outside the lock).
``Evaluation.listener`` hears when the candidate's process starts and when timing begins and ends
(quiet timing pauses neighbours then).

Tensors cross process boundaries through a private per-evaluation exchange folder in shared memory
(``/dev/shm``; the candidate's scratch directory only where shared memory lacks room): the reference
process writes the hidden input sets there (the candidate gets tensors, never seeds) and reads the
candidate's outputs from there to compare them on its device. Nothing goes through a disk, and the
reference outputs and the comparison never come near the candidate's process. torch and the standard library.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pike_harness.worker import kinds, redaction
from pike_harness.worker.channel import (
    Channel,
    ChannelClosed,
    ChannelStalled,
    ChannelTimeout,
    ProtocolViolation,
)
from pike_harness.worker.check_plan import PlannedCall, check_plan
from pike_harness.worker.environment import DEVICE_INFO_KEYS, host_info
from pike_harness.worker.inside import fresh_seeds
from pike_harness.worker.inside.protocols import TimingProtocol, get_protocol
from pike_harness.worker.records import (
    CATEGORIES,
    COMPILE_ERROR,
    CORRECT,
    DEVICE_OOM_MARKS,
    REJECTED,
    RUNTIME_ERROR,
    TIMEOUT,
    EvalRequest,
    EvalResult,
    NoiseReport,
    PairedTiming,
    RuntimeStats,
)
from pike_harness.worker.supervise import (
    build_flags,
    exchange,
    fresh_inputs,
    gpu_clocks,
    held_memory,
    jit_caches,
    no_space,
    noise,
    sandbox,
    scratch_usage,
    static_checks,
    timed_outputs,
    trusted_files,
)
from pike_harness.worker.supervise.buildcache import (
    BUILD_LIMIT_CHECK,
    BuildTimeout,
    HandOutRefused,
    ToolchainError,
)
from pike_harness.worker.supervise.compare import Comparison
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.spawn import Spawned, spawn_child, visible_devices

if TYPE_CHECKING:  # the engine's interface for a device's trusted reference (reference.ReferenceOracle)
    from pike_harness.worker.supervise.engine.devices import Oracle

# Peak memory bandwidth (bytes/s) by GPU name, for the "faster than reading its own data" flag.
# Unknown GPUs get the fastest entry, so the flag errs towards silence.
PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.04e12, "B200": 8.0e12, "L40": 0.864e12,
                  "A10": 0.6e12, "L4": 0.3e12, "T4": 0.32e12}
DISK_POLICE_S = 2.0  # how often the candidate's folders are measured (a walk, dearer than a /proc scan)
# How long a process may read as a zombie whose other threads still run before it ends the candidate: a
# multi-threaded process that exits is in that state until its last thread has unmapped its memory
# (10-260 ms measured, 2026-12-01); one whose main thread alone exited stays so.
ZOMBIE_GRACE_S = 3.0
DISK_MAX_ENTRIES = 200_000
TIMER_FLOOR_MS = 0.001  # below a microsecond per call no real forward has ever been timed
# Before each comparison tried again once a candidate whose reference ran out of device memory has
# been ended: its memory returns as the driver tears its context down, within a second in practice.
STARVED_RETRY_PAUSES_S = (0.0, 1.0, 3.0)
# What the candidate left where an exchange file goes, as a folder, is renamed to this prefix while it
# may still run (``_set_aside``): removed with the exchange folder, after its processes are ended.
SET_ASIDE_PREFIX = ".set-aside-"
JIT_NOTE_CHARS = 500  # why a JIT cache was not shared, as the result keeps it (it names the candidate's files)


class DeviceLock(Protocol):
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...


@dataclass
class WorkerSettings:
    """Where an evaluator's files go and how the sandbox behaves; shared by all its evaluations."""

    workdir: Path  # private: reference outputs and logs (mode 0700)
    scratch_root: Path | None = None  # candidates' scratch directories (default: workdir/scratch)
    python: str = sys.executable
    tail_chars: int = 10_000
    poll_s: float = 0.1  # how often the channel is checked
    police_s: float = 0.25  # how often the candidate's processes are counted and weighed
    environ: Mapping[str, str] | None = None  # the environment to scrub (default: os.environ)
    keep_scratch: bool = False  # debugging only: leave the candidate's scratch directory behind
    # Evaluator II (all optional; None keeps the behaviour of a plain fresh process per candidate):
    prestart: Any = None  # a prestart.PrestartPool: take a ready process instead of starting one
    start_slots: Any = None  # a scheduling.OrderedSlots: process starts at once (prestart.start_admitted)
    quiet: Any = None  # the quiet registry: processes still starting are paused during a timing
    build_cache: Any = None  # a buildcache.BuildCache: load_inline builds shared by content
    jit_cache_root: Path | None = None  # Triton/Inductor caches in ROOT/<hash of the source>/
    cpus: set[int] | None = None  # cores a freshly started candidate process may use
    isolation: Any = None  # an isolation.Isolation: the sandbox candidate processes start in (None: none)
    # Where per-evaluation exchange folders (hidden inputs, outputs to compare) go; None: /dev/shm when
    # it has room for the largest file a candidate may write, else the candidate's scratch directory.
    exchange_root: Path | None = None
    # Each device's noise-canary baseline and the limits a timing is judged noisy by (one per engine).
    noise: noise.NoiseWatch = field(default_factory=noise.NoiseWatch)
    # Where a paired re-timing's blocks run (engine.paired): "rotate" pins both sides of each pair to one
    # core, the next pair to the next; "free" leaves them where the scheduler puts them.
    paired_cores: str = "rotate"
    # Whether timed loops make fresh calls (``EvalRequest.fresh_input_sets`` of them; off: PIKE's loop).
    fresh_inputs: bool = True

    def source_environ(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ


CHECK_PARTS = ("inputs", "construct", "calls", "outputs")  # how the child splits the correctness stage
# The child's notes are flags from a fixed vocabulary (a few per report); a report with more, or with a
# longer one, was written by the candidate. Unbounded, 10**6 notes took hours to merge while the
# candidate held the device (a list scan per note).
MAX_NOTES, MAX_NOTE_CHARS = 64, 200
MAX_CHECK_CHARS = 100  # a check is a machine name ("memory_limit"); the child's own are under 40

# What the supervisor reads of each of the child's messages, by event: every field it reads, when present
# and not null (null counts as absent), is a ``str``, a ``dict`` (an object, kept as it is), a ``float``
# (a finite number >= 0, an int too, never a bool), a list of one kind (``[kind]``) or an object whose
# named fields are checked alike (``{name: kind}``). The candidate shares the child's process and can
# write any of these messages, a command's nonce included (it can read it from the child's frames): a
# field of another kind is its ``rejected/protocol``, never an exception of the supervisor's. The
# checker (``kinds.problem``) is shared with ``records``, which reads a remote worker's result.
REPORT_FIELDS: dict[str, dict[str, Any]] = {
    "importing": {"environment": dict},
    "loaded": {"seconds": float},
    "warmed": {"seconds": float},
    "checked": {"notes": [str], "seconds": {part: float for part in CHECK_PARTS}},
    "timed": {"notes": [str], "canary_ms": [float], "threads": dict, "backend_flags": dict, "pin": dict,
              "run": {"samples_ms": [float], "host_ms": [float], "span_ms": [float], "host_wall_ms": float,
                      "warmup": float, "reps": float, "estimate_ms": float, "fresh_ms": [float],
                      "fresh_at": [float]}},
    "profiled": {"profile": {"error": str, "device": str, "unit": str, "calls": float, "wall_ms_per_call": float,
                             "busy_ms_per_call": float, "gap_ms_per_call": float, "share": kinds.Each(float),
                             "n_kernels": float, "launches_per_call": float,
                             "kernels": [{"name": str, "origin": str, "total_ms": float, "ms_per_call": float,
                                          "per_call": float, "share": float}]}},
    "sampled": {"sets": [int], "fresh": [int]},
    "failed": {"category": str, "check": str, "reason": str},
    "retry_alone": {"reason": str},
    "infra_error": {"reason": str},
    "build": {"spec": dict},
}


def report_problem(message: dict[str, Any]) -> str | None:
    """Which field of one of the child's messages is not of its kind (``REPORT_FIELDS``), or None."""
    kind = message.get("event")
    fields = REPORT_FIELDS.get(kind) if isinstance(kind, str) else None
    problem = kinds.problem(message, fields, "") if fields else None
    return f"the {kind!r} message's field {problem}" if problem else None


class _Concluded(Exception):
    def __init__(self, result: EvalResult):
        self.result = result


Concluded = _Concluded  # public name: a paired re-timing ends its reference's evaluation on it


@dataclass
class TimedBlock:
    """One run of the candidate process's timed loop: its summary, the child's reply, its window on
    the system-wide monotonic clock (so other processes' stamps can be placed against it), the host's
    CPU steal share over it, and the noise canary's readings (before, after)."""

    stats: RuntimeStats
    reply: dict[str, Any]
    start_ns: int
    end_ns: int
    steal: float | None
    canary_pair: tuple[float | None, float | None]
    fresh: fresh_inputs.FreshTimes = field(default_factory=fresh_inputs.FreshTimes)  # ``fresh_inputs.ratios``


class RetryAlone(Exception):
    """The candidate ran out of device memory while other candidates' models held theirs: run the
    stage (``args[0]``) again with no other checked model on the device. Once per evaluation."""


@dataclass
class _Stages:
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + value, 6)


class Evaluation:
    """One candidate's evaluation; call ``load()``, then (holding the device) ``finish()`` (or ``check()``
    and ``time()`` in their own device phases), then ``close()``."""

    def __init__(self, request: EvalRequest, oracle: Oracle, settings: WorkerSettings):
        if request.limits.memory_mb is None:
            request = dataclasses.replace(request, limits=dataclasses.replace(
                request.limits, memory_mb=default_memory_mb()))
        self.request = request
        self.oracle = oracle
        self.settings = settings
        self.protocol: TimingProtocol = get_protocol(request.protocol, request.protocol_params)
        self.started = time.monotonic()
        self.stages = _Stages()
        self.flags: list[str] = []
        self.environment: dict[str, Any] = {**host_info(), "device": request.device}
        self.profile: dict[str, Any] | None = None  # the profile stage's summary, when the request asks
        self.hidden_seeds = oracle.hidden_seeds(request)  # this run's secret pool for the task
        # Seeds of the sets the child makes before the candidate is imported and shows only in timed
        # loops (``fresh_inputs``): drawn for this evaluation alone, none of its public or hidden seeds.
        self.fresh_wanted = settings.fresh_inputs and request.fresh_input_sets > 0
        self.fresh_seeds = fresh_inputs.draw(request, self.hidden_seeds, settings.fresh_inputs,
                                             settings.noise.limits.redo, oracle.set_bytes(request))
        self.timing_runs = fresh_inputs.Runs()  # which runs' fresh calls the verdict rests on (``_time``)
        self.timing_redone = 0  # timings redone for noise (``_time``)
        # Each paired block's fresh call and timed calls, over that block's typical call.
        self.block_fresh = fresh_inputs.FreshTimes()
        self.secrets = redaction.secret_values(settings.source_environ())
        self.popen: subprocess.Popen | None = None
        self.spawned: Spawned | None = None  # the candidate's process as started (its log descriptors)
        self.jit_folder: Path | None = None  # its private JIT folder, when the JIT caches are shared
        self.channel: Channel | None = None
        self.scratch: Path | None = None
        self.exchange: Path | None = None  # the exchange folder, once the hidden inputs are in it
        self.inputs_sha256 = ""  # the hidden inputs file's digest as the reference process wrote it
        self.spawned_exchange: Path | None = None  # the one made (and bound) with the candidate's process
        self.marker = secrets.token_hex(12)
        self.result: EvalResult | None = None
        self._policed = 0.0
        self._disk_policed = 0.0
        self._zombies: dict[tuple[int, int], float] = {}  # (pid, start) -> when first seen a zombie with live threads
        self._aborted = threading.Event()
        # Called as listener(event, evaluation) with "spawned", "build_start", "build_end", "timing_start",
        # "timing_end".
        self.listener: Callable[[str, Evaluation], None] | None = None
        # Seconds the candidate's process has spent paused by quiet timing (set by schedulers that
        # pause it), and seconds its builds were paused: stage deadlines are extended by both.
        self.paused_s: Callable[[], float] = lambda: 0.0
        self.build_paused_s = 0.0
        self.device = request.device
        self.alone = False  # set once the candidate asked to run a stage again alone (RetryAlone)
        self.candidate_ran = False  # set when the child says it imports the candidate ("importing")
        self.seeds_sent = False  # the fresh sets' seeds, sent when the child asked, before the import
        self.start_key: Any = (0, 0)  # its place among process starts waiting for a slot (set by the engine)
        self._checked: tuple[Comparison, int] | None = None  # the passing comparison, reference bytes
        self.noise: NoiseReport | None = None  # the canary and steal around the timing kept
        self.paired: PairedTiming | None = None  # the paired re-timing, when the request asks and it ran

    @property
    def session(self) -> int | None:
        """The candidate's session (= process group) id while its process is unreaped."""
        if self.popen is None or self.popen.returncode is not None:
            return None
        return self.popen.pid

    def abort(self) -> None:
        """Thread-safe: make the evaluation stop at its next policing step (the evaluator is closing)."""
        self._aborted.set()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def share_abort(self, other: Evaluation) -> None:
        """Stop when ``other`` is aborted (a paired re-timing's reference, which the engine does not track)."""
        self._aborted = other._aborted

    def _notify(self, event: str) -> None:
        if self.listener is not None:
            self.listener(event, self)

    # -- phase 1 -------------------------------------------------------------------------------
    def load(self) -> EvalResult | None:
        """Static checks, then start the candidate and import it. A result here is final."""
        try:
            self._static_checks()
            self._spawn()
            began = time.monotonic()
            loaded = self._await("loaded", self.request.limits.compile_timeout_s, "compile")
            seconds = float(loaded.get("seconds") or 0.0)  # fields checked by _await (REPORT_FIELDS)
            self.stages.add("compile", seconds)
            self.stages.add("startup", max(0.0, time.monotonic() - began - seconds))
            return None
        except _Concluded as done:
            return done.result

    def wait_for(self, lock: DeviceLock) -> EvalResult | None:
        """Acquire ``lock`` while policing the idle candidate; a result means it broke a limit meanwhile."""
        try:
            self._prepare_inputs()  # CPU work in the reference process: before the device is held
        except _Concluded as done:
            return done.result
        began = time.monotonic()
        try:
            while not lock.acquire(timeout=self.settings.poll_s):
                self._police()
            return None
        except _Concluded as done:
            return done.result
        finally:
            self.stages.add("wait_device", time.monotonic() - began)

    def _prepare_inputs(self) -> None:
        """Create the exchange folder and have the reference process write the hidden input sets into it."""
        if self.exchange is not None:
            return
        assert self.scratch is not None
        # Made with the process (bound into its sandbox then): a pre-started one's too.
        self.exchange = self.spawned_exchange or exchange.make(self.settings.exchange_root, self.scratch)
        self.environment["exchange"] = "shared_memory" if exchange.on_tmpfs(self.exchange) else "disk"
        began = time.monotonic()
        # Waiting for the reference process (other candidates' comparisons and timings hold it, for
        # minutes): the idle candidate is policed meanwhile, as while it waits for the device.
        try:
            planted, self.inputs_sha256 = self.oracle.write_inputs(self.request, self.hidden_seeds,
                                                                   self.exchange / "inputs.pt",
                                                                   timeout_s=self.request.limits.run_timeout_s,
                                                                   tick=self._police)
        except no_space.NoSpace as full:  # the candidate's verdict only if its own usage explains it
            self.stages.add("inputs", time.monotonic() - began)
            reason = self._no_space(full, self.exchange.parent)
            raise _Concluded(self._conclude(REJECTED, "exchange_file", reason)) from None
        self.stages.add("inputs", time.monotonic() - began)
        if planted:
            raise _Concluded(self._conclude(REJECTED, "exchange_file", planted))

    def _no_space(self, full: no_space.NoSpace, written: Path) -> str:
        """A trusted write into the candidate's folders found no space (``full``): the verdict's reason when
        the candidate's own usage, measured here, explains it; else the host's disk or shared memory is
        full and this raises ``InfrastructureError`` (``no_space.blame``). ``written``: a folder of the
        harness's on the written file system."""
        members = sandbox.sandbox_members(self.popen.pid, fresh=True) if self.popen is not None else []
        folders = [f for f in (self.scratch, self.spawned_exchange, self.exchange) if f is not None]
        blame = no_space.blame(folders, written, limit_mb=self.request.limits.disk_mb, needed_bytes=full.needed_bytes,
                               pids=[(m.pid, m.start) for m in members], max_entries=DISK_MAX_ENTRIES)
        if blame.candidate:
            return f"{full.reason}: {blame.reason}"
        # Space no walk sees (a file passed through a socket and never received, then unlinked: an audit,
        # 2026-11-30) comes free when its processes end (``no_space.FREED_WAIT_S``): room it held makes
        # it the candidate's.
        before = no_space.room_of(written)
        self._kill()
        freed = no_space.freed_since(written, before, full.needed_bytes)
        if freed is not None:
            return f"{full.reason}: {freed}"
        raise InfrastructureError(f"{blame.reason}: {full.reason}")

    def warm(self) -> EvalResult | None:
        """Phase 1, optional: one call of the candidate on a throwaway model, outside the lock.

        Triton JIT and ``torch.compile`` compile on the first call; here they compile in a CPU slot
        instead of holding the device. The call runs on the device: schedulers pause warming
        candidates while a neighbour is being timed (quiet timing). A result here is final.
        """
        try:
            assert self.channel is not None
            began = time.monotonic()
            self._send({"cmd": "warm"}, "warmup")
            warmed = self._await("warmed", self.request.limits.run_timeout_s, "warmup")
            self.stages.add("warmup", time.monotonic() - began)
            self.stages.add("warmup_call", float(warmed.get("seconds") or 0.0))
            return None
        except _Concluded as done:
            return done.result

    # -- phase 2 -------------------------------------------------------------------------------
    def finish(self) -> EvalResult:
        """Correctness on every input set, comparison in this process, then the timing protocol."""
        return self.check() or self.time()

    def check(self, shared: bool = False) -> EvalResult | None:
        """The checked calls and their comparison; None when they pass (timing is next).

        ``shared``: other candidates' models may hold device memory (the engine's shared check
        phase); running out of device memory then raises ``RetryAlone`` instead of a verdict."""
        try:
            return self._check(shared)
        except _Concluded as done:
            return done.result

    def time(self, shared: bool = False) -> EvalResult:
        """The timing protocol on the checked model, and the verdict (``shared`` as for ``check``)."""
        try:
            return self._time(shared)
        except _Concluded as done:
            return done.result

    def _check(self, shared: bool) -> EvalResult | None:
        request = self.request
        self._prepare_inputs()
        assert self.channel is not None and self.exchange is not None
        inputs, outputs = self.exchange / "inputs.pt", self.exchange / "outputs.pt"
        began = time.monotonic()
        nonce = secrets.token_hex(16)
        self._send({"cmd": "check", "inputs": str(inputs), "inputs_sha256": self.inputs_sha256, "outputs": str(outputs),
                    "nonce": nonce, "shared": shared}, "correctness")
        try:
            checked = self._await("checked", request.limits.run_timeout_s, "correctness", nonce=nonce)
        except RetryAlone:
            _set_aside(outputs)  # the attempt's own file: the next attempt creates the name anew (O_EXCL)
            raise
        finally:
            self.stages.add("correctness", time.monotonic() - began)
        self._note(checked.get("notes"))
        for part, seconds in (checked.get("seconds") or {}).items():  # the child's own split: informational
            if part in CHECK_PARTS and seconds is not None:
                self.stages.add(f"correctness_{part}", float(seconds))

        began = time.monotonic()
        seeds, labels = self._input_sets()
        try:
            try:
                reply = self._compare(seeds, outputs, labels)
            except InfrastructureError as exc:
                if not any(mark in str(exc) for mark in DEVICE_OOM_MARKS):
                    raise
                if shared and not self.alone:
                    # The reference ran out of device memory while candidates' models held theirs: check again alone.
                    self.alone = True
                    self.environment["ran_alone"] = f"reference: {str(exc)[:300]}"
                    raise RetryAlone("reference") from None
                verdict = self._reference_starved(exc, seeds, outputs, labels, began)
                _set_aside(inputs)
                return verdict
        finally:
            _set_aside(outputs)  # whatever the candidate left there: a link itself, never its target
        _set_aside(inputs)  # kept until now: a check run again alone reads them again
        return self._judge(reply, began)

    def _input_sets(self) -> tuple[list[int], list[str]]:
        """Every input set's seed (public, then hidden) and its label in a verdict's reason."""
        request = self.request
        return (list(request.input_seeds) + self.hidden_seeds,
                [f"seed {s}" for s in request.input_seeds] + ["hidden seed"] * len(self.hidden_seeds))

    def _compare(self, seeds: list[int], outputs: Path, labels: list[str]) -> dict[str, Any]:
        """The reference process's judgement of the outputs file (``reference.Oracle.compare``)."""
        return self.oracle.compare(self.request, seeds, outputs, labels, self._plan(),
                                   warmed="warmup" in self.stages.seconds, timeout_s=self.request.limits.run_timeout_s)

    def _judge(self, reply: dict[str, Any], began: float) -> EvalResult | None:
        """The verdict the comparison reached, or None when the outputs passed (kept for ``time()``)."""
        if reply.get("malformed"):
            return self._conclude(REJECTED, "outputs_file", str(reply["malformed"]))
        seconds = reply.get("seconds") or {}
        reference_s, compare_s = float(seconds.get("reference", 0.0)), float(seconds.get("compare", 0.0))
        self.stages.add("reference", reference_s)
        self.stages.add("compare", compare_s)
        # waiting for the reference process (another request in progress) and the round trip
        self.stages.add("reference_wait", max(0.0, time.monotonic() - began - reference_s - compare_s))
        comparison = Comparison.from_dict(reply["comparison"])
        self.flags.extend(f for f in comparison.flags if f not in self.flags)
        if comparison.category is not None:
            return self._conclude(comparison.category, comparison.check, comparison.reason,
                                  outputs=comparison.checks)
        self._checked = (comparison, int(reply.get("reference_bytes") or 0))
        return None

    def _reference_starved(self, exc: InfrastructureError, seeds: list[int], outputs: Path, labels: list[str],
                           began: float) -> EvalResult:
        """The check's comparison ran out of device memory with no other candidate's checked model
        resident: ``_starved`` compares again once the candidate's processes have ended; its own failing
        outputs are its verdict, else ``runtime_error/memory_limit`` (``_starved_verdict``)."""
        reply = self._starved(exc, lambda: self._compare(seeds, outputs, labels))
        verdict = self._judge(reply, began)
        if verdict is not None:  # its outputs fail on their own: that verdict says more
            return verdict
        return self._starved_verdict(exc)

    def _starved(self, exc: InfrastructureError, compare: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The reference process ran out of device memory judging this candidate (``exc``): the candidate's
        processes are ended (the device memory they held goes back when they exit) and ``compare`` runs
        again, its reply returned. If it still fails, the memory is held elsewhere and the error stays the
        infrastructure's (retried, never blamed on the code). Without this, a candidate holding the
        device's memory made every retry fail and stopped the run."""
        self._kill()
        self.environment["reference_starved"] = str(exc)[:300]
        for pause_s in STARVED_RETRY_PAUSES_S:
            time.sleep(pause_s)  # a killed process's device memory is freed as the driver tears its context down
            try:
                return compare()
            except InfrastructureError as again:
                if not any(mark in str(again) for mark in DEVICE_OOM_MARKS):
                    raise
        raise InfrastructureError(f"{exc} (and again after the candidate's processes ended: the device's "
                                  "memory is held outside this evaluation)") from None

    def _starved_verdict(self, exc: InfrastructureError) -> EvalResult:
        """The reference ran once the candidate's processes had ended: what it lacked was held by the
        candidate, whose verdict that is, ``runtime_error/memory_limit``, as when the candidate's own
        allocation fails (PIKE runs the reference and the candidate in one process, where they share the
        device's memory the same way)."""
        first = str(exc).replace("the task's reference Model failed: ", "").splitlines()[0][:300]
        return self._conclude(RUNTIME_ERROR, "memory_limit",
                              "the task's reference ran out of device memory beside the candidate's process and "
                              f"ran once that process had ended: the candidate holds the device memory a check "
                              f"needs ({first})")

    def _time(self, shared: bool) -> EvalResult:
        """The ordinary timing between noise-canary readings, redone (``NoiseLimits.redo`` times at most)
        while the canary or the host's steal time says the host was noisy; the kept run's fresh calls
        judged (``fresh_inputs``: a run they condemn is taken once more); then, on request, the paired
        re-timing against the task's reference (``engine/paired.py``, its blocks' fresh calls judged
        likewise), and the verdict."""
        request = self.request
        assert self.channel is not None and self._checked is not None, "time() before a passing check()"
        comparison, reference_bytes = self._checked
        clocks_before = self._gpu_clocks()
        watch = self.settings.noise
        self._notify("timing_start")
        try:
            # Kept on the evaluation: a timing begun beside others' models and taken again alone
            # (``RetryAlone``) goes on from the runs and redos before it, so the fresh sets drawn for
            # every run it can make (``fresh_inputs.pool_size``) still last to its confirmation.
            runs = self.timing_runs
            while True:
                block = self.timed_block(shared=shared)
                runs.seen(block.fresh)
                report = watch.report(self.device, *block.canary_pair, block.steal, self.timing_redone)
                if report.flagged is not None and self.timing_redone < watch.limits.redo:
                    self.timing_redone += 1
                    continue
                if runs.kept(block.fresh):
                    break
        finally:
            self._notify("timing_end")
        watch.record(self.device, report)
        cached = fresh_inputs.judge(runs.judged, "the ordinary timing")
        self.environment["fresh_inputs"] = fresh_inputs.summary(runs.judged)
        if cached is not None and runs.final:
            raise _Concluded(self._conclude(REJECTED, fresh_inputs.CHECK, cached, outputs=comparison.checks))
        self._flag_suspect(runs.judged)
        if self.fresh_wanted and runs.kept_calls < fresh_inputs.MIN_CALLS:
            self._add_flag(fresh_inputs.UNJUDGED_FLAG)
        self.noise = report
        if report.flagged is not None and noise.NOISY_FLAG not in self.flags:
            self.flags.append(noise.NOISY_FLAG)
        if clocks_before is not None:
            self.environment["gpu_clocks"] = {"before": clocks_before, "after": self._gpu_clocks()}
        self.environment["threads"] = block.reply.get("threads")
        self.environment["backend_flags"] = block.reply.get("backend_flags")
        run = block.reply.get("run") or {}
        self.protocol_details = {"warmup": run.get("warmup"), "reps": run.get("reps"),
                                 "estimate_ms": run.get("estimate_ms")}
        self._plausibility(block.stats.headline_ms, reference_bytes)
        if request.paired is not None:
            from pike_harness.worker.supervise.engine import paired

            paired.retime(self)
            if self.block_fresh.fresh:
                self.environment["fresh_inputs"]["blocks"] = fresh_inputs.summary(self.block_fresh)
            cached = fresh_inputs.judge(self.block_fresh, "the paired re-timing's blocks")
            if cached is not None:
                raise _Concluded(self._conclude(REJECTED, fresh_inputs.CHECK, cached, outputs=comparison.checks))
            self._flag_suspect(self.block_fresh)
        self._judge_timed_outputs()
        if request.profile:
            self._profile()
        return self._conclude(CORRECT, None, None, outputs=comparison.checks, runtime=block.stats)

    def _flag_suspect(self, times: fresh_inputs.FreshTimes) -> None:
        """Flag fresh calls whose ratios condemn where the tests do not, or not finally (``Runs.final``)."""
        if fresh_inputs.slow(times):
            self._add_flag(fresh_inputs.SUSPECT_FLAG)

    def _add_flag(self, flag: str) -> None:
        if flag not in self.flags:
            self.flags.append(flag)

    def _judge_timed_outputs(self) -> None:
        """After every timing of the candidate (outside the quiet window, which keeps the reference
        process idle), the reference process judges one timed call per input set, drawn at random by the
        child over all of them (``timed_outputs``); a wrong one ends the evaluation."""
        request = self.request
        assert self.exchange is not None
        checks = self._checked[0].checks if self._checked is not None else None
        path = self.exchange / "timed.pt"
        seeds, labels = self._input_sets()
        began = time.monotonic()
        nonce = secrets.token_hex(16)
        try:
            self._send({"cmd": "samples", "outputs": str(path), "nonce": nonce}, "timing")
            sampled = self._await("sampled", request.limits.run_timeout_s, "timing", nonce=nonce)
            sets = timed_outputs.sampled_sets(sampled.get("sets"), len(seeds))
            fresh = timed_outputs.sampled_sets(sampled.get("fresh") or [], len(self.fresh_seeds))
            if sets is None or fresh is None:
                raise _Concluded(self._conclude(REJECTED, "protocol", "timing: the drawn timed outputs' sets are "
                                                "malformed", outputs=checks))

            def compare() -> dict[str, Any]:
                return self.oracle.compare_timed(request, seeds, path, sets, labels, self._plan(),
                                                 timeout_s=request.limits.run_timeout_s,
                                                 fresh_seeds=[self.fresh_seeds[index] for index in fresh])

            starved = None
            try:
                reply = compare()
            except InfrastructureError as exc:  # out of device memory: the candidate may be holding it
                if not any(mark in str(exc) for mark in DEVICE_OOM_MARKS):
                    raise
                starved, reply = exc, self._starved(exc, compare)
        finally:
            _set_aside(path)  # whatever stands there: a link itself, never its target
            self.stages.add("timed_outputs", time.monotonic() - began)
        if reply.get("malformed"):
            raise _Concluded(self._conclude(REJECTED, "outputs_file", f"timing: {reply['malformed']}", outputs=checks))
        judged = Comparison.from_dict(reply["comparison"])
        if judged.category is not None:
            raise _Concluded(self._conclude(judged.category, judged.check, judged.reason, outputs=checks))
        if starved is not None:
            raise _Concluded(self._starved_verdict(starved))

    def timed_block(self, params: dict[str, Any] | None = None, *, shared: bool = False,
                    core: int | None = None) -> TimedBlock:
        """One run of the child's timed loop, by the request's protocol or with ``params`` in place of
        its parameters (a paired block), checked (report shape, timer cross-check) and summarised;
        ``core``: the child runs it with its main thread pinned there. Raises ``Concluded`` when the
        candidate broke a rule meanwhile."""
        request = self.request
        assert self.channel is not None and self._checked is not None, "a timing before a passing check()"
        protocol = self.protocol if params is None else get_protocol(request.protocol, params)
        comparison = self._checked[0]
        cpu_before = noise.read_cpu_times()
        start_ns = time.monotonic_ns()
        nonce = secrets.token_hex(16)
        command: dict[str, Any] = {"cmd": "time", "nonce": nonce, "shared": shared}
        if params is not None:
            command["params"] = params
        # Fresh calls (``fresh_inputs``): each run of the ordinary timing makes the request's number, each
        # paired block one; the child makes those its unused sets allow.
        if self.fresh_seeds:
            command["fresh"] = request.fresh_input_sets if params is None else 1
        if core is not None:
            command["core"] = core
        self._send(command, "timing")
        timed = self._await("timed", request.limits.run_timeout_s, "timing", nonce=nonce)
        end_ns = time.monotonic_ns()
        steal = noise.steal_fraction(cpu_before, noise.read_cpu_times())
        wall_ms = (end_ns - start_ns) / 1e6
        self.stages.add("timing", wall_ms / 1000.0)
        self._note(timed.get("notes"))
        run = timed.get("run") or {}
        samples = [float(x) for x in run.get("samples_ms") or []]  # fields checked by _await (REPORT_FIELDS)
        host = [float(x) for x in run.get("host_ms") or []]
        if not samples or len(samples) != len(host):
            raise _Concluded(self._conclude(REJECTED, "protocol", "the timing report is malformed",
                                            outputs=comparison.checks))
        span = [float(x) for x in run.get("span_ms") or []]
        problem = _cross_check(span if len(span) == len(host) else samples, host, wall_ms,
                               cuda=request.device.startswith("cuda"))
        if problem:
            raise _Concluded(self._conclude(REJECTED, "timer_cross_check", problem, outputs=comparison.checks))
        canary = [float(x) for x in timed.get("canary_ms") or [] if x > 0]
        fresh = fresh_inputs.ratios([float(x) for x in run.get("fresh_ms") or []], samples)
        if params is not None:
            self.block_fresh.extend(fresh)
        return TimedBlock(stats=protocol.summarize(samples, float(run.get("host_wall_ms") or 0.0)), reply=timed,
                          start_ns=start_ns, end_ns=end_ns, steal=steal,
                          canary_pair=(canary[0], canary[1]) if len(canary) == 2 else (None, None),
                          fresh=fresh)

    def _gpu_clocks(self) -> dict[str, Any] | None:
        """SM/memory clocks, power limit, temperature of the evaluation's GPU (None on a CPU/without NVML)."""
        if not self.request.device.startswith("cuda"):
            return None
        return gpu_clocks.read(visible_devices(self.request.device, self.settings.source_environ()))

    def _profile(self) -> None:
        """The profile stage (EvalRequest.profile): informational, so a failure is recorded, not judged."""
        began = time.monotonic()
        nonce = secrets.token_hex(16)
        assert self.channel is not None
        self._send({"cmd": "profile", "nonce": nonce}, "profile")
        profiled = self._await("profiled", self.request.limits.run_timeout_s, "profile", nonce=nonce)
        self.stages.add("profile", time.monotonic() - began)
        self.profile = profiled.get("profile") if isinstance(profiled.get("profile"), dict) else None

    # -- the candidate's process ---------------------------------------------------------------
    def _static_checks(self) -> None:
        try:
            report = static_checks.scan(self.request.candidate_source)
        except SyntaxError as exc:
            where = f"line {exc.lineno}: " if exc.lineno is not None else ""  # a source too deep to place
            raise _Concluded(self._conclude(COMPILE_ERROR, "syntax", f"SyntaxError: {where}{exc.msg}")) from None
        except (ValueError, RecursionError) as exc:  # null bytes, absurd nesting
            raise _Concluded(self._conclude(COMPILE_ERROR, "syntax", f"{type(exc).__name__}: {exc}")) from None
        self.flags.extend(report.flags)
        if report.check:
            raise _Concluded(self._conclude(REJECTED, report.check, report.reason))

    def _spawn(self) -> None:
        """Adopt a pre-started process for the device (if the pool has one ready), else start one."""
        settings = self.settings
        device = self.request.device
        began = time.monotonic()

        def aborted() -> None:
            if self._aborted.is_set():
                raise InfrastructureError("the evaluation was aborted")

        spawned: Spawned | None = settings.prestart.take(device, aborted) if settings.prestart is not None else None
        if spawned is None and settings.start_slots is not None:
            from pike_harness.worker.supervise.prestart import StartFailed, start_admitted

            try:
                spawned = start_admitted(settings, device, self.start_key, cpus=settings.cpus, registry=settings.quiet,
                                         tick=aborted)
            except StartFailed as exc:
                raise InfrastructureError(str(exc)) from None
        elif spawned is None:
            spawned = spawn_child(settings, device, cpus=settings.cpus)
        self.popen, self.channel, self.scratch, self.marker = (spawned.popen, spawned.channel, spawned.scratch,
                                                               spawned.marker)
        self.spawned_exchange = spawned.exchange
        self.spawned = spawned
        self.environment["prestarted"] = spawned.prestarted
        self.stages.add("spawn", time.monotonic() - began)
        self._notify("spawned")
        # The request (the sources: it may be larger than the pipe) goes to a process that may still be
        # importing torch before it reads anything: it has the compile stage's limit to start reading.
        # The fresh sets' seeds follow as a frame of their own, when the child asks (``_await``).
        self._send({"request": _as_dict(self.request), "setup": self._setup(),
                    "fresh": {"count": len(self.fresh_seeds), "max_bytes": fresh_inputs.MAX_BYTES}}, "compile",
                   self.request.limits.compile_timeout_s)

    def _setup(self) -> dict[str, Any]:
        """What the child applies before importing the candidate: cache locations, the build hook."""
        setup: dict[str, Any] = {"build_cache": self.settings.build_cache is not None}
        root = self.settings.jit_cache_root
        if root is not None and self.scratch is not None:
            try:
                self.jit_folder, setup["env"] = jit_caches.prepare(Path(root), self.scratch,
                                                                   self.request.candidate_source,
                                                                   self.request.baseline_mode)
            except trusted_files.UntrustedFile as exc:  # its scratch folder, tampered with before it ran
                raise _Concluded(self._conclude(REJECTED, "scratch_file", f"no JIT folder could be made: {exc}")) \
                    from None
        return setup

    def _send(self, message: dict[str, Any], stage: str, timeout_s: float | None = None) -> None:
        """A message to the child, bounded in time (``spawn.SEND_TIMEOUT_S``, or ``timeout_s``): a
        candidate that makes our child ask for replies (``build`` requests) and never lets it read them
        fills the pipe, and is judged for it instead of holding this thread, and the device lock it may
        hold, forever."""
        assert self.channel is not None
        try:
            self.channel.send(message, timeout_s)
        except ChannelStalled as exc:
            raise _Concluded(self._conclude(REJECTED, "protocol", f"{stage}: the candidate's process stopped "
                                            f"reading the worker's channel ({exc})")) from None
        except BrokenPipeError:  # its reading end is closed: the process ended (or closed it) between stages
            raise _Concluded(self._died(stage)) from None

    def _await(self, event: str, timeout_s: float, stage: str, *, nonce: str | None = None) -> dict[str, Any]:
        """The child's ``event``; with ``nonce``, only a reply that echoes it (anything else claiming to
        be that reply was written by the candidate, which shares the child's process)."""
        assert self.channel is not None and self.popen is not None
        base = time.monotonic() + timeout_s
        paused_before, built_before = self.paused_s(), self.build_paused_s
        exited_at: float | None = None
        while True:
            # Policed on every pass, not only when no message came: a candidate writing messages without
            # pause (the child's channel is its to write) kept every limit unchecked (an audit, 2026-12-01).
            self._police()
            deadline = base + (self.paused_s() - paused_before) + (self.build_paused_s - built_before)
            try:
                message = self.channel.receive(deadline, self.settings.poll_s)
            except ChannelTimeout:
                raise _Concluded(self._conclude(TIMEOUT, f"{stage}_timeout",
                                                f"the {stage} stage ran past its {timeout_s:g} s limit")) from None
            except ChannelClosed:
                raise _Concluded(self._died(stage)) from None
            except ProtocolViolation as exc:
                raise _Concluded(self._conclude(REJECTED, "protocol", f"{stage}: {exc}")) from None
            if message is None:
                if self.popen.poll() is not None:
                    # Exited, but a descendant may still hold the pipe open: give it a moment, then give up.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 1.0:
                        raise _Concluded(self._died(stage))
                continue
            kind = message.get("event")
            if kind == event and nonce is not None and message.get("nonce") != nonce:
                raise _Concluded(self._conclude(REJECTED, "forged_report",
                                                f"{stage}: a {event!r} report without this evaluation's nonce "
                                                "reached the supervisor: the candidate wrote to the worker's channel"))
            problem = report_problem(message)
            if problem:
                raise _Concluded(self._conclude(REJECTED, "protocol", f"{stage}: {problem}"))
            if kind == event:
                return message
            if kind == "retry_alone" and nonce is not None and message.get("nonce") == nonce and not self.alone:
                # the child asks only when told others share the device; once alone, it cannot ask again
                self.alone = True
                self.environment["ran_alone"] = f"{stage}: {str(message.get('reason') or '')[:300]}"
                raise RetryAlone(stage)
            if kind == "build":
                self._send({"build": self._serve_build(message.get("spec"), deadline, stage, timeout_s)}, stage)
                continue
            if kind == "failed":
                category = message.get("category")
                if category not in CATEGORIES or category == CORRECT:
                    category = REJECTED
                raise _Concluded(self._conclude(category, str(message.get("check") or stage)[:MAX_CHECK_CHARS],
                                                str(message.get("reason") or "")))
            if kind == "fresh_seeds":
                # Asked once, before the import (the candidate cannot ask: the frame would be its to read);
                # sent as bytes, never in a message (``worker.inside.fresh_seeds``).
                if self.candidate_ran or self.seeds_sent:
                    raise _Concluded(self._conclude(REJECTED, "forged_report",
                                                    f"{stage}: a request for the fresh sets' seeds the harness's "
                                                    "code did not send reached the supervisor: the candidate "
                                                    "wrote to the worker's channel"))
                self.seeds_sent = True
                try:
                    self.channel.send_bytes(fresh_seeds.frame(self.fresh_seeds))
                except (ChannelStalled, BrokenPipeError):
                    raise _Concluded(self._died(stage)) from None
                continue
            if kind == "importing":  # the candidate's code runs in the child from now on
                if self.candidate_ran:  # the child sends one, before the import: any other is the candidate's
                    raise _Concluded(self._conclude(REJECTED, "forged_report",
                                                    f"{stage}: a second 'importing' report reached the supervisor: "
                                                    "the candidate wrote to the worker's channel"))
                self._take_device_info(message.get("environment") or {})
                self.candidate_ran = True
                continue
            if kind == "infra_error":
                # The child reports its own failures only before the candidate's code runs (no device, the
                # task's inputs); from then on whatever fails in that process is the candidate's verdict, so
                # an infra_error, nonce or not (one can be read from the stack), was written by the candidate.
                if not self.candidate_ran:
                    self._kill()
                    raise InfrastructureError(str(message.get("reason"))[:2000])
                # A candidate's failure passed off as the harness's would be retried, and abort a run.
                raise _Concluded(self._conclude(REJECTED, "forged_report",
                                                f"{stage}: an infra_error report the harness's code did not send "
                                                "reached the supervisor: the candidate wrote to the worker's channel"))
            shown = repr(kind[:MAX_CHECK_CHARS]) if isinstance(kind, str) else kinds.shown(kind)
            raise _Concluded(self._conclude(REJECTED, "protocol", f"{stage}: unexpected message {shown}"))

    def _take_device_info(self, reported: dict[str, Any]) -> None:
        """The child's description of its device (torch, CUDA, the GPU), from its ``importing`` message:
        only ``DEVICE_INFO_KEYS``, and never over a key the supervisor recorded itself (the host, the
        device asked for). A later message's ``environment`` is never read: the candidate could have
        written it, claiming another GPU or a note of the supervisor's."""
        self.environment.update({key: value for key, value in reported.items()
                                 if key in DEVICE_INFO_KEYS and key not in self.environment})

    def _serve_build(self, spec: Any, deadline: float, stage: str, timeout_s: float) -> dict[str, Any]:
        """Answer the child's ``load_inline`` call from the build cache (see ``inline_hook``)."""
        cache = self.settings.build_cache
        if cache is None or self.scratch is None:
            return {"fallback": True}
        problem = build_flags.spec_problem(spec, str(self.scratch))
        if problem:  # never reaches the builder's shell (ninja runs every rule through /bin/sh)
            raise _Concluded(self._conclude(REJECTED, "build_flags", f"load_inline {problem}"))
        began = time.monotonic()
        self._notify("build_start")
        try:
            reply = cache.serve(spec, self.request.device, self.scratch, deadline=deadline, tick=self._police,
                                memory_mb=self.request.limits.memory_mb, disk_mb=self.request.limits.disk_mb)
        except BuildTimeout:
            raise _Concluded(self._conclude(TIMEOUT, f"{stage}_timeout",
                                            f"the {stage} stage ran past its {timeout_s:g} s limit "
                                            "while building a load_inline extension")) from None
        except HandOutRefused as exc:
            reason = str(exc)
            if exc.errno in no_space.NO_SPACE:  # the candidate's verdict only if its own usage explains it
                reason = self._no_space(no_space.NoSpace(reason, exc.needed_bytes), self.scratch)
            raise _Concluded(self._conclude(REJECTED, "scratch_file", reason)) from None
        except ToolchainError as exc:  # the cache cannot key builds here: build privately, as without one
            self.environment.setdefault("build_cache_error", str(exc)[:500])
            return {"fallback": True}
        finally:
            self._notify("build_end")
        self.stages.add("build", time.monotonic() - began)
        self.build_paused_s += float(reply.get("paused_s") or 0.0)
        summary = self.environment.setdefault("build_cache", {"hits": 0, "misses": 0, "failures": 0,
                                                              "fallbacks": 0})
        if reply.get("fallback"):
            summary["fallbacks"] += 1
        elif reply.get("hit"):
            summary["hits"] += 1
        elif reply.get("ok"):
            summary["misses"] += 1
        else:
            summary["failures"] += 1
        if not reply.get("ok") and reply.get("check") == BUILD_LIMIT_CHECK:  # stopped, not failed: say which bound
            raise _Concluded(self._conclude(COMPILE_ERROR, BUILD_LIMIT_CHECK, str(reply.get("reason") or "")))
        if not reply.get("ok") and no_space.says_no_space(str(reply.get("log") or "")):
            # Within its bounds (else build_limit above), a build that found no space is the host's when
            # the build cache's disk is short of what a build may take; the log (the candidate's source
            # can print those words) only decides whether to measure.
            wanted_mb = min(cache.disk_mb, self.request.limits.disk_mb or cache.disk_mb)
            members = sandbox.sandbox_members(self.popen.pid, fresh=True) if self.popen is not None else []
            short = no_space.host_short(cache.root / "staging", wanted_mb * no_space.MB,
                                        own=[f for f in (self.scratch, self.spawned_exchange, self.exchange) if f],
                                        pids=[(m.pid, m.start) for m in members], max_entries=DISK_MAX_ENTRIES)
            if short is not None:
                # Room no walk sees (a file in flight in a socket) comes free when its processes end: as
                # for a trusted write (``_no_space``), room that then comes free was the candidate's.
                staging = cache.root / "staging"
                before = no_space.room_of(staging)
                self._kill()
                missing = wanted_mb * no_space.MB - (before.free if before is not None else 0)
                freed = no_space.freed_since(staging, before, missing)
                if freed is not None:
                    raise _Concluded(self._conclude(RUNTIME_ERROR, "disk_limit",
                                                    f"a load_inline build found no space: {freed}"))
                raise InfrastructureError(f"a load_inline build found no space: {short}")
        return {k: v for k, v in reply.items() if k in ("ok", "path", "log", "hit", "fallback")}

    def _police(self) -> None:
        """Kill the candidate when its sandbox holds too many processes, threads, memory or disk.

        Counted over the sandbox's PID namespace (``sandbox.sandbox_members``), so what a candidate
        starts with ``setsid()`` or a double fork counts too. Every ``DISK_POLICE_S`` the memory also
        counts what its processes hold in memfds and deleted shared-memory files (``held_memory``), which
        no RSS shows.
        """
        assert self.popen is not None
        if self._aborted.is_set():
            self._kill()
            raise InfrastructureError("the evaluation was aborted: the evaluator is closing")
        now = time.monotonic()
        if now - self._policed < self.settings.police_s:
            return
        self._policed = now
        members = sandbox.sandbox_members(self.popen.pid)
        limits = self.request.limits
        for member in members:
            if member.state == "Z" and member.threads > 1 and \
                    now - self._zombies.setdefault((member.pid, member.start), now) >= ZOMBIE_GRACE_S:
                raise _Concluded(self._conclude(
                    RUNTIME_ERROR, "process_limit",
                    f"a process of the candidate's (pid {member.pid}) ran {member.threads - 1} "
                    f"thread{'s' if member.threads != 2 else ''} for {ZOMBIE_GRACE_S:g} s or more after its main thread "
                    "had exited: such a process shows no memory, files or children of its own, so "
                    "no limit could be measured"))
        if len(members) - self._wrappers() > limits.max_processes:
            raise _Concluded(self._conclude(RUNTIME_ERROR, "process_limit",
                                            f"the candidate started more than {limits.max_processes} processes"))
        threads = sum(member.threads for member in members) - self._wrappers()
        if threads > limits.max_threads:
            raise _Concluded(self._conclude(RUNTIME_ERROR, "thread_limit",
                                            f"the candidate's processes ran {threads} threads, over the "
                                            f"{limits.max_threads} limit"))
        memory_mb = limits.memory_mb
        disk_due = now - self._disk_policed >= DISK_POLICE_S
        if memory_mb:
            limit = int(memory_mb * 1024 * 1024)
            held = held_memory.Held()
            if disk_due:  # memfds and deleted shared-memory files: a walk of fds and maps, at the disk walk's pace
                folders = [f for f in (self.scratch, self.spawned_exchange, self.exchange) if f is not None]
                held = held_memory.measure([(m.pid, m.start) for m in members],
                                           counted_as_disk=held_memory.devices_of(folders))
            if held.over:
                raise _Concluded(self._conclude(RUNTIME_ERROR, "memory_limit",
                                                f"the memory the candidate's processes hold in memfd and deleted "
                                                f"shared-memory files could not all be counted ({held.over}), "
                                                f"judged over the {memory_mb} MB limit"))
            used = held.bytes + sandbox.memory_bytes(members, limit - held.bytes, less_shmem=held.mapped_by)
            if used > limit:
                of_it = f" ({held.bytes / 2**20:.0f} MB of it held in memfd and deleted shared-memory files)" \
                    if held.bytes else ""
                raise _Concluded(self._conclude(RUNTIME_ERROR, "memory_limit",
                                                f"the candidate's processes used {used / 2**20:.0f} MB{of_it}, "
                                                f"over the {memory_mb} MB limit"))
        if disk_due:
            self._disk_policed = now
            self._police_disk(members)

    def _police_disk(self, members: list[sandbox.ProcessInfo]) -> None:
        """Scratch and exchange folders together, with the files deleted there that the sandbox's
        processes (``members``) still hold open, under ``disk_mb`` and ``DISK_MAX_ENTRIES`` entries; a
        folder the walk could not count (``scratch_usage.Usage.uncounted``) is over it too."""
        folders = list(dict.fromkeys(f for f in (self.scratch, self.spawned_exchange, self.exchange) if f is not None))
        usage = scratch_usage.measure(folders, DISK_MAX_ENTRIES, pids=[(m.pid, m.start) for m in members])
        limit_mb = self.request.limits.disk_mb
        if usage.over_entries or usage.uncounted or usage.bytes > limit_mb * 1024 * 1024:
            if usage.over_entries:
                written = f"held more than {DISK_MAX_ENTRIES} files"
            elif usage.uncounted:
                written = f"could not all be measured: {usage.uncounted}"
            else:
                held = f" ({usage.held_bytes / 2**20:.0f} MB of it in files deleted but held open or mapped)" \
                    if usage.held_bytes else ""
                written = f"held {usage.bytes / 2**20:.0f} MB{held}"
            raise _Concluded(self._conclude(RUNTIME_ERROR, "disk_limit",
                                            f"the candidate's folders {written}, over the {limit_mb} MB "
                                            f"and {DISK_MAX_ENTRIES}-file disk limit"))

    def _died(self, stage: str) -> EvalResult:
        assert self.popen is not None
        try:
            code = self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and self._wrappers() and code > 128:  # bwrap exits 128+N for a child killed by N
            code = 128 - code
        if code is None:
            reason = f"the candidate's process closed its channel during {stage} without reporting"
            check = "crash"
        elif code < 0:
            name = sandbox.signal_name(code)
            check = {"SIGXFSZ": "file_size_limit", "SIGKILL": "killed"}.get(name, "crash")
            reason = f"the candidate's process died from {name} during {stage}"
            if name == "SIGXFSZ":
                reason += f" (a file grew past the {self.request.limits.file_size_mb} MB limit)"
        else:
            check = "exited"
            reason = f"the candidate's process exited with status {code} during {stage} without reporting"
        return self._conclude(RUNTIME_ERROR, check, reason)

    def _wrappers(self) -> int:
        """Processes of the candidate's session that belong to its sandbox, not to the candidate."""
        isolation = self.settings.isolation
        return isolation.wrapper_processes if isolation is not None else 0

    def _plan(self) -> list[PlannedCall]:
        """The checked calls, in the order the child makes them (the supervisor's own copy of the plan)."""
        return check_plan(len(self.request.input_seeds) + len(self.hidden_seeds), self.request.baseline_mode)

    # -- the verdict ---------------------------------------------------------------------------
    def _note(self, notes: Any) -> None:
        notes = list(notes or [])
        if len(notes) > MAX_NOTES or any(len(note) > MAX_NOTE_CHARS for note in notes):
            raise _Concluded(self._conclude(REJECTED, "protocol",
                                            f"a report with {len(notes):,} notes, the longest "
                                            f"{max(map(len, notes)):,} characters (at most {MAX_NOTES} of "
                                            f"{MAX_NOTE_CHARS}): not the harness's child"))
        for note in notes:
            if note not in self.flags:
                self.flags.append(note)

    def _plausibility(self, headline_ms: float, written: int) -> None:
        """Flags (never verdicts) for runtimes no real forward pass reaches (threat 17, first cut)."""
        if headline_ms < TIMER_FLOOR_MS:
            self.flags.append("below_timer_floor")
        gpu = str(self.environment.get("gpu") or "")
        if not self.request.device.startswith("cuda") or not gpu:
            return
        peak = next((bw for name, bw in PEAK_BANDWIDTH.items() if name in gpu), max(PEAK_BANDWIDTH.values()))
        if headline_ms / 1000.0 < written / peak:
            self.flags.append("faster_than_memory_bound")

    def _kill(self) -> None:
        if self.popen is not None:
            sandbox.kill_all(self.popen, self.marker)

    def _conclude(self, category: str, check: str | None, reason: str | None, *, outputs: list | None = None,
                  runtime: Any = None) -> EvalResult:
        """Stop the candidate, collect its logs, and write the result record.

        The scratch directory goes in ``close()``: this may run while the device is held, and deleting
        a tree of build products there would keep the next candidate waiting for nothing.
        """
        self._kill()
        stdout, stderr = self.spawned.tails(self.settings.tail_chars) if self.spawned is not None else ("", "")
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.stages.add("total", time.monotonic() - self.started)
        request = self.request
        mask = lambda value: redaction.redact(value, self.secrets)  # noqa: E731 - EvalResult masks os.environ's too
        protocol = {**self.protocol.describe(), "params": dict(request.protocol_params)}
        protocol.update(getattr(self, "protocol_details", {}))
        self.result = EvalResult(
            request_id=request.request_id, task=request.task, category=category, reason=mask(reason),
            check=check, runtime_ms=runtime.headline_ms if runtime is not None else None, runtime=runtime,
            outputs=list(outputs or []), flags=mask(list(self.flags)), stage_seconds=dict(self.stages.seconds),
            stdout_tail=mask(stdout), stderr_tail=mask(stderr), protocol=protocol,
            environment=mask(self.environment), isolation=_isolation_label(self.settings.isolation),
            seeds={"weight": request.weight_seed, "public": list(request.input_seeds), "hidden": self.hidden_seeds,
                   "fresh": self.fresh_seeds},
            profile=self.profile, noise=self.noise if category == CORRECT else None,
            paired=self.paired if category == CORRECT else None,
        )
        return self.result

    def _cleanup(self) -> None:
        """Delete the candidate's folders; what could not be removed is reported in the result's
        ``environment["cleanup"]`` (and never raises: leftovers are not the harness's crash)."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.spawned is not None:
            self.spawned.close_logs()
        problems: list[str] = []
        root, jit_folder, self.jit_folder = self.settings.jit_cache_root, self.jit_folder, None
        if root is not None and jit_folder is not None and self.result is not None and self.result.is_correct:
            note = jit_caches.publish(Path(root), jit_folder, self.request.candidate_source, self.request.baseline_mode)
            if note:  # into the result (the verdict copied the environment), escaped: it names the candidate's files
                self.result.environment["jit_cache"] = redaction.shown(note, self.secrets, JIT_NOTE_CHARS)
        for folder in {f for f in (self.exchange, self.spawned_exchange) if f is not None}:
            problems += trusted_files.remove_tree(folder)
        self.exchange = self.spawned_exchange = None
        if self.scratch is not None and not self.settings.keep_scratch:
            problems += trusted_files.remove_tree(self.scratch)
            self.scratch = None
        if problems and self.result is not None:
            self.result.environment.setdefault("cleanup", []).extend(problems[:trusted_files.PROBLEMS_KEPT])

    def close(self) -> None:
        """Idempotent: kill whatever is left and delete the scratch directory."""
        self._kill()
        self._cleanup()


def _set_aside(path: Path) -> str | None:
    """Clear ``path``, a file of the exchange folder, while the candidate may still run; the problem in
    words, or None. Never raises, and never looks inside what is there: a non-folder (a link itself
    included) is unlinked; a folder (which the candidate may keep extending, a level at a time, deeper
    than any removal goes) is renamed aside, by the exchange folder's descriptor, to an unguessable
    name beside it, and left for ``_cleanup``, which removes the whole exchange folder once the
    candidate's processes are ended (``close()``, after the device is released). Disk policing
    measures it meanwhile."""
    try:
        folder = trusted_files.open_directory(path.parent)
    except trusted_files.UntrustedFile as exc:
        return str(exc)
    try:
        try:
            os.unlink(path.name, dir_fd=folder)
            return None
        except FileNotFoundError:
            return None
        except (IsADirectoryError, PermissionError):  # a folder (EISDIR; EPERM by POSIX), or a locked one
            pass
        except OSError as exc:
            return f"{path.name}: {exc.strerror}"
        try:
            os.rename(path.name, f"{SET_ASIDE_PREFIX}{path.name}-{secrets.token_hex(8)}",
                      src_dir_fd=folder, dst_dir_fd=folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return f"{path.name}: cannot be set aside: {exc.strerror}"
        return None
    finally:
        os.close(folder)


def _isolation_label(isolation: Any) -> str:
    return isolation.label if isolation is not None else "none"


def _cross_check(samples: list[float], host: list[float], wall_ms: float, *, cuda: bool) -> str | None:
    """The device timer against the host clock, and both against the supervisor's own clock.

    ``samples`` are the device-clock spans that match the host-clock ``host`` spans call by call
    (on CUDA: flush plus call, from the event recorded before the flush), not the timed windows.
    """
    total, host_total = sum(samples), sum(host)
    if host_total > wall_ms * 1.05 + 50.0:
        return (f"the timed calls claim {host_total:.1f} ms of host time, but the timing stage took "
                f"{wall_ms:.1f} ms by the supervisor's clock")
    if cuda:
        gap_per_call = (host_total - total) / len(samples)
        if total < 0.5 * host_total and gap_per_call > 0.1:
            return (f"CUDA events measured {total:.3f} ms where the host clock saw {host_total:.3f} ms "
                    "around the same calls")
        if total > 1.5 * host_total + 1.0:
            return f"CUDA events measured {total:.3f} ms, more than the host clock's {host_total:.3f} ms"
    return None


def _as_dict(request: EvalRequest) -> dict[str, Any]:
    return dataclasses.asdict(request)


def default_memory_mb() -> int:
    """Half of this host's memory: room for the harness and a concurrent evaluation or two."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return max(2048, pages * page // (2 * 1024 * 1024))
    except (ValueError, OSError):
        return 16384
